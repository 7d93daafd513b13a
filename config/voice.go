package config

import (
	"regexp"
	"time"
)

// Voice reply policies (voice.reply).
const (
	VoiceReplyNever        = "never"
	VoiceReplyAlways       = "always"
	VoiceReplyWhenSpokenTo = "when_spoken_to"
)

// Voice configures speech in and out of conversations: voice messages
// transcribed into the pipeline, and optional spoken replies. The zero
// value is off: audio messages reach agents as attachments, as before.
// The fields mirror the voice package's options (the bot converts them).
type Voice struct {
	// Transcription turns people's audio messages into text; on when its
	// base_url is set.
	Transcription VoiceTranscription `yaml:"transcription"`
	// Speech speaks replies; on when enabled.
	Speech VoiceSpeech `yaml:"speech"`
	// Reply says when an agent's text reply is also sent as a voice
	// message: never (the default), always, or when_spoken_to (the
	// person's message was audio).
	Reply string `yaml:"reply"`
	// MaxAudioBytes bounds a recording sent to transcription and the
	// audio the speech endpoint returns. Default 25MiB.
	MaxAudioBytes ByteSize `yaml:"max_audio_bytes"`
}

// VoiceTranscription is an OpenAI-compatible speech-to-text endpoint
// (POST {base_url}/audio/transcriptions): whisper.cpp's server,
// faster-whisper servers, OpenAI, Groq.
type VoiceTranscription struct {
	// BaseURL is the API's base URL, usually ending in /v1.
	BaseURL string `yaml:"base_url"`
	// Model is sent as the model field (default whisper-1).
	Model string `yaml:"model"`
	// Language is the spoken language as an ISO-639-1 code ("" lets the
	// server detect it).
	Language string `yaml:"language"`
	// APIKey is sent as a bearer token when set.
	APIKey Secret `yaml:"api_key"`
	// Timeout bounds one request (default 60s).
	Timeout Duration `yaml:"timeout"`
}

// VoiceSpeech is an OpenAI-compatible text-to-speech endpoint (POST
// {base_url}/audio/speech).
type VoiceSpeech struct {
	Enabled bool `yaml:"enabled"`
	// BaseURL is the API's base URL, usually ending in /v1.
	BaseURL string `yaml:"base_url"`
	// Model is sent as the model field (default tts-1).
	Model string `yaml:"model"`
	// Voice is the server's voice name (default alloy).
	Voice string `yaml:"voice"`
	// Format is the audio format asked for: opus (the default, Ogg/Opus as
	// Matrix clients record), mp3, aac, flac, wav or pcm.
	Format string `yaml:"format"`
	// APIKey is sent as a bearer token when set.
	APIKey Secret `yaml:"api_key"`
	// Timeout bounds one request (default 60s).
	Timeout Duration `yaml:"timeout"`
}

// TranscriptionEnabled reports whether audio messages are transcribed.
func (v Voice) TranscriptionEnabled() bool { return v.Transcription.BaseURL != "" }

var voiceLanguageRE = regexp.MustCompile(`^[a-z]{2,3}$`)

func (v *validator) voice() {
	vc := v.c.Voice
	t := vc.Transcription
	if t.BaseURL != "" {
		v.httpURL("voice.transcription.base_url", t.BaseURL)
	} else if t.Model != "" || t.Language != "" || t.APIKey.IsSet() || t.Timeout != 0 {
		v.errorf("voice.transcription.base_url", "is required when voice.transcription is set")
	}
	if t.Language != "" && !voiceLanguageRE.MatchString(t.Language) {
		v.errorf("voice.transcription.language", "%q is not an ISO-639-1 code such as en or de", t.Language)
	}
	if t.Timeout < 0 {
		v.errorf("voice.transcription.timeout", "must be positive, not %s", time.Duration(t.Timeout))
	}
	s := vc.Speech
	if s.Enabled {
		if s.BaseURL == "" {
			v.errorf("voice.speech.base_url", "is required when voice.speech.enabled is true")
		} else {
			v.httpURL("voice.speech.base_url", s.BaseURL)
		}
	}
	if s.Format != "" {
		v.oneOf("voice.speech.format", s.Format, "opus", "mp3", "aac", "flac", "wav", "pcm")
	}
	if s.Timeout < 0 {
		v.errorf("voice.speech.timeout", "must be positive, not %s", time.Duration(s.Timeout))
	}
	switch vc.Reply {
	case "", VoiceReplyNever:
	case VoiceReplyAlways, VoiceReplyWhenSpokenTo:
		if !s.Enabled {
			v.errorf("voice.reply", "%q needs voice.speech.enabled: true", vc.Reply)
		}
	default:
		v.oneOf("voice.reply", vc.Reply, VoiceReplyNever, VoiceReplyAlways, VoiceReplyWhenSpokenTo)
	}
	if vc.MaxAudioBytes < 0 {
		v.errorf("voice.max_audio_bytes", "must be positive, not %d", vc.MaxAudioBytes)
	}
}
