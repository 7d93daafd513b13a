// Package voice owns speech in and out of a conversation, with no Matrix
// client of its own: the Transcriber turns a voice message's audio into
// text through an OpenAI-compatible POST /v1/audio/transcriptions endpoint
// (whisper.cpp's server, faster-whisper servers, OpenAI, Groq), and the
// Speaker turns a reply into audio through POST /v1/audio/speech.
//
// The bot calls Classify on every m.room.message before its pipeline: an
// audio message (m.audio, with or without the MSC3245 voice flag) is
// downloaded (and decrypted) by the bot, handed to Transcribe, and the
// transcript shown in the thread with TranscriptText and then handled as
// the person's words — never as a command. When Options.Reply asks for a
// spoken answer, the bot calls Speak with the reply's text and sends the
// audio it returns with ReplyContent.
//
// Options decode from config.yaml's voice: section; their zero value turns
// everything off. Clients never put their API key into an error or a log:
// errors name the endpoint, without credentials.
package voice
