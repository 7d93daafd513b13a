package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/voice"
)

// Voice messages (config.yaml's voice:). A person's audio message is
// transcribed before the pipeline sees it: a notice "🎤 …" is posted in
// the message's thread, the audio is downloaded (and decrypted) and sent
// to the transcription endpoint, the notice is edited into the transcript,
// and the message goes on as the person's text — with SourceKind voice,
// never parsed as a command. When the reply policy asks for it, the
// agent's text reply is also spoken and sent as an m.audio voice message
// once the turn ended.

// Transaction-key stages of what voice posts for a message: the
// placeholder, its edit into the transcript or into a failure notice, and
// the spoken reply. A replay after a crash finds what its first run
// posted instead of posting again.
const (
	stageVoicePlaceholder = "voice-placeholder"
	stageVoiceTranscript  = "voice-transcript"
	stageVoiceFailed      = "voice-failed"
	stageVoiceReply       = "voice-reply"
)

// Notices shown in place of a transcript.
const (
	voiceWorking     = "🎤 …"
	voiceUnavailable = "🎤 I could not transcribe this voice message: the transcription service did not answer. Please try again later, or type your message."
	voiceTooLarge    = "🎤 I could not transcribe this voice message: it is larger than the %s limit."
	voiceNoWords     = "🎤 I could not hear any words in this voice message."
	voiceNoDownload  = "🎤 I could not download this voice message."
	voiceTimedOut    = "🎤 I could not transcribe this voice message: the transcription service took too long. Please try again later, or type your message."
)

// voiceOptions converts config.yaml's voice: section to the voice
// package's options.
func voiceOptions(c config.Voice) voice.Options {
	return voice.Options{
		Transcription: voice.TranscriptionOptions{
			BaseURL: c.Transcription.BaseURL, Model: c.Transcription.Model, Language: c.Transcription.Language,
			APIKey: voice.Secret(c.Transcription.APIKey.Reveal()), Timeout: c.Transcription.Timeout.Std(),
		},
		Speech: voice.SpeechOptions{
			Enabled: c.Speech.Enabled, BaseURL: c.Speech.BaseURL, Model: c.Speech.Model, Voice: c.Speech.Voice,
			Format: c.Speech.Format, APIKey: voice.Secret(c.Speech.APIKey.Reveal()), Timeout: c.Speech.Timeout.Std(),
		},
		Reply:         voice.ReplyMode(c.Reply),
		MaxAudioBytes: int64(c.MaxAudioBytes),
	}
}

// maxVoiceBytes is voice.max_audio_bytes with its default.
func maxVoiceBytes(c config.Voice) int64 {
	if c.MaxAudioBytes > 0 {
		return int64(c.MaxAudioBytes)
	}
	return voice.DefaultMaxAudioBytes
}

// transcribeVoice is called by handleMessage for every person's message,
// after the edit checks and approval answers, before the envelope is
// built. For a message that is not audio, or when transcription is off,
// it returns ev and msg unchanged with voiced false. For an audio message
// it shows the transcript in the thread and returns the event as the
// pipeline goes on with it: the same event (id, sender, room, relations)
// with m.text content whose body is the transcript, and voiced true.
// handled is true when the message ends here: the transcription failed
// and the person was told, or hookroom is stopping (the message is then
// replayed on the next start).
func (b *Bot) transcribeVoice(ctx context.Context, w *world, ev *event.Event, msg *event.MessageEventContent) (_ *event.Event, _ *event.MessageEventContent, voiced, handled bool) {
	cfg := w.cfg.Voice
	if !cfg.TranscriptionEnabled() || voice.Classify(msg) == voice.NotAudio || !b.someAgentAdmits(ctx, w, ev) {
		return ev, msg, false, false
	}
	log := zerolog.Ctx(ctx)
	acct := b.speakerIn(w, ev.RoomID)
	opts := matrixio.SendOptions{Notice: true, PlainText: true}
	if root := threadRoot(msg); root != "" {
		opts.ThreadRoot = root
	} else if w.threadMode(ev.RoomID) != config.ThreadModeRoom {
		opts.ThreadRoot = ev.ID
	} else {
		opts.ReplyTo = ev.ID
	}
	placeholder, err := acct.SendText(ctx, ev.RoomID, voiceWorking, withTxnKey(opts, matrixio.TxnKey(ev.ID, stageVoicePlaceholder)))
	if err != nil {
		if ctx.Err() != nil {
			return ev, msg, true, true
		}
		log.Warn().Err(err).Msg("failed to post the voice transcript")
	}
	// show edits the placeholder (or, when it could not be posted, sends
	// text as a new notice).
	show := func(text, stage string) {
		key := matrixio.TxnKey(ev.ID, stage)
		var err error
		if placeholder != "" {
			_, err = acct.Edit(ctx, ev.RoomID, placeholder, text, withTxnKey(opts, key))
		} else {
			_, err = acct.SendText(ctx, ev.RoomID, text, withTxnKey(opts, key))
		}
		if err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("failed to post the voice transcript")
		}
	}
	transcript, notice, err := b.transcribe(ctx, cfg, msg)
	if err != nil {
		if ctx.Err() != nil {
			return ev, msg, true, true // stopping: replayed on the next start
		}
		if errors.Is(err, voice.ErrEmptyTranscript) || errors.Is(err, voice.ErrTooLarge) {
			// The recording's fault, not the service's: nothing to fix.
			log.Info().Err(err).Msg("voice message not transcribed")
		} else {
			log.Warn().Err(err).Msg("failed to transcribe a voice message")
		}
		show(notice, stageVoiceFailed)
		return ev, msg, true, true
	}
	show(voice.TranscriptText(transcript), stageVoiceTranscript)
	log.Info().Int("chars", len(transcript)).Msg("voice message transcribed")
	tev, tmsg := transcribedEvent(ev, msg, transcript)
	return tev, tmsg, true, false
}

// someAgentAdmits reports whether the authorization policy lets one of
// the room's agents answer ev's sender, so that nobody the policy refuses
// (a stranger in a direct message awaiting pairing) has hookroom pay for a
// transcription. Such a message goes on untranscribed, and admit refuses
// it (or offers pairing) as for any other message.
func (b *Bot) someAgentAdmits(ctx context.Context, w *world, ev *event.Event) bool {
	if w.policy == nil { // a world built by hand (tests)
		return true
	}
	for _, agent := range b.agentsOf(w, ev.RoomID) {
		if b.decide(ctx, w, ev, agent).Allow {
			return true
		}
	}
	return false
}

// transcribe downloads the audio of msg and returns its transcript, or
// the notice telling the person why there is none and the error.
func (b *Bot) transcribe(ctx context.Context, cfg config.Voice, msg *event.MessageEventContent) (transcript, notice string, err error) {
	limit := maxVoiceBytes(cfg)
	tooLarge := fmt.Sprintf(voiceTooLarge, config.ByteSize(limit))
	if msg.Info != nil && int64(msg.Info.Size) > limit {
		return "", tooLarge, fmt.Errorf("failed to transcribe: the recording has %d bytes, more than max_audio_bytes %d: %w", msg.Info.Size, limit, voice.ErrTooLarge)
	}
	ref, ok := matrixio.MediaRefOf(msg)
	if !ok {
		return "", voiceNoDownload, errors.New("failed to download the recording: the message names no valid file")
	}
	data, err := b.downloadMedia(ctx, ref, limit)
	switch {
	case errors.Is(err, matrixio.ErrMediaTooLarge):
		return "", tooLarge, fmt.Errorf("failed to download the recording: %w", err)
	case err != nil:
		return "", voiceNoDownload, fmt.Errorf("failed to download the recording: %w", err)
	}
	tr, err := voice.NewTranscriber(voiceOptions(cfg), nil)
	if err != nil {
		return "", voiceUnavailable, err
	}
	transcript, err = tr.Transcribe(ctx, voice.AudioOf(msg, data))
	switch {
	case err == nil:
		return transcript, "", nil
	case errors.Is(err, voice.ErrEmptyTranscript):
		return "", voiceNoWords, err
	case errors.Is(err, voice.ErrTooLarge):
		return "", tooLarge, err
	case errors.Is(err, context.DeadlineExceeded):
		return "", voiceTimedOut, err
	}
	return "", voiceUnavailable, err
}

// transcribedEvent is ev as the pipeline sees a transcribed audio
// message: m.text whose body is transcript, with ev's relations (thread,
// reply) and mentions, and no file.
func transcribedEvent(ev *event.Event, msg *event.MessageEventContent, transcript string) (*event.Event, *event.MessageEventContent) {
	text := &event.MessageEventContent{MsgType: event.MsgText, Body: transcript, RelatesTo: msg.RelatesTo, Mentions: msg.Mentions}
	tev := *ev
	tev.Content = event.Content{Parsed: text}
	if raw, err := json.Marshal(text); err == nil {
		tev.Content.VeryRaw = raw
		_ = json.Unmarshal(raw, &tev.Content.Raw)
	}
	return &tev, text
}

func withTxnKey(opts matrixio.SendOptions, key string) matrixio.SendOptions {
	opts.TxnKey = key
	return opts
}

// queueSpokenReply is called by handleMessage right after it started
// agent's turn for ev. When voice.reply asks for a spoken reply to this
// message (always, or when_spoken_to and the message was audio), it
// queues the spoken reply behind the turn in the thread's queue: once the
// turn ended, the reply it delivered is spoken and sent by the agent's
// account as an m.audio voice message in the thread (encrypted in an
// encrypted room), its text as the body. A turn that delivered no reply
// gets no spoken one; a failure is logged and the text reply stands.
func (b *Bot) queueSpokenReply(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName) {
	opts := voiceOptions(w.cfg.Voice)
	if !opts.SpeakReply(env.SourceKind == hooks.SourceVoice) || env.Depth > 0 {
		return
	}
	acct := w.agents[agent]
	if acct == nil {
		return
	}
	scope := agents.NewScopeKey(env.RoomID, env.ResolvedThreadID)
	b.turns.Run(ctx, scope, func(ctx context.Context) {
		log := zerolog.Ctx(ctx).With().Str("agent", string(agent)).Logger()
		text, ok, err := b.deliveredReply(ctx, ev.ID, scope, env.Body)
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("failed to send a spoken reply")
			return
		case !ok:
			log.Debug().Msg("no reply to speak")
			return
		}
		if err := b.sendSpokenReply(ctx, acct, opts, env, ev.ID, text); err != nil {
			if errors.Is(err, voice.ErrTextTooLong) {
				log.Info().Msg("the reply is too long to speak; it was sent as text only")
				return
			}
			if ctx.Err() == nil {
				log.Warn().Err(err).Msg("failed to send a spoken reply")
			}
			return
		}
		log.Info().Msg("spoken reply sent")
	})
}

// deliveredReply returns the text of the reply the turn of source
// delivered: the thread's last stored answer, when a reply to source was
// posted and the last stored user turn holds the message's text (so an
// earlier turn's answer is never taken for this one's).
func (b *Bot) deliveredReply(ctx context.Context, source id.EventID, scope agents.ScopeKey, body string) (string, bool, error) {
	replies, err := b.track.Replies(ctx, source)
	if err != nil || len(replies) == 0 {
		return "", false, err
	}
	msgs, err := b.history.Load(ctx, scope)
	if err != nil {
		return "", false, fmt.Errorf("failed to read the thread's history: %w", err)
	}
	n := len(msgs)
	if n < 2 || msgs[n-1].Role != agents.RoleAssistant || strings.TrimSpace(msgs[n-1].Content) == "" {
		return "", false, nil
	}
	for i := n - 2; i >= 0; i-- {
		if msgs[i].Role == agents.RoleUser {
			return msgs[n-1].Content, strings.Contains(msgs[i].Content, strings.TrimSpace(body)), nil
		}
	}
	return "", false, nil
}

// sendSpokenReply speaks text, uploads the audio with acct (encrypted in
// an encrypted room) and sends it as a voice message in env's thread.
func (b *Bot) sendSpokenReply(ctx context.Context, acct *matrixio.Account, opts voice.Options, env hooks.Envelope, source id.EventID, text string) error {
	speaker, err := voice.NewSpeaker(opts, nil)
	if err != nil {
		return err
	}
	speech, err := speaker.Speak(ctx, text)
	if err != nil {
		return err
	}
	content := voice.ReplyContent(speech, text)
	encrypted, err := acct.IsEncrypted(ctx, env.RoomID)
	if err != nil {
		return fmt.Errorf("failed to learn whether the room is encrypted: %w", err)
	}
	data, ctype := speech.Data, speech.ContentType
	var file *attachment.EncryptedFile
	if encrypted {
		file = attachment.NewEncryptedFile()
		data = file.Encrypt(data)
		ctype = "application/octet-stream"
	}
	up, err := acct.Client().UploadBytesWithName(ctx, data, ctype, content.FileName)
	if err != nil {
		return fmt.Errorf("failed to upload the spoken reply: %w", err)
	}
	if file != nil {
		content.File = &event.EncryptedFileInfo{EncryptedFile: *file, URL: up.ContentURI.CUString()}
	} else {
		content.URL = up.ContentURI.CUString()
	}
	if root := env.ResolvedThreadID; root != "" {
		fallback, err := acct.LatestThreadEvent(ctx, env.RoomID, root)
		if err != nil || fallback == "" {
			fallback = root
		}
		content.RelatesTo = (&event.RelatesTo{}).SetThread(root, fallback)
	} else {
		content.RelatesTo = (&event.RelatesTo{}).SetReplyTo(source)
	}
	content.Mentions = &event.Mentions{}
	if _, err := acct.SendEvent(ctx, env.RoomID, event.EventMessage, content, matrixio.TxnKey(source, stageVoiceReply)); err != nil {
		return fmt.Errorf("failed to send the spoken reply: %w", err)
	}
	return nil
}
