package voice

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// Defaults applied by the With… methods when a field is zero.
const (
	// DefaultMaxAudioBytes is OpenAI's upload limit, 25 MiB.
	DefaultMaxAudioBytes = 25 << 20
	// DefaultTimeout bounds one request to either endpoint.
	DefaultTimeout       = 60 * time.Second
	DefaultTranscriber   = "whisper-1"
	DefaultSpeechModel   = "tts-1"
	DefaultVoice         = "alloy"
	DefaultSpeechFormat  = "opus"
	maxSpeechInputRunes  = 4096
	maxErrorMessageBytes = 300
)

// Options configure voice (config.yaml's voice: section). The zero value
// is off: nothing is transcribed and nothing spoken.
type Options struct {
	// Transcription turns voice messages into text; on when its base_url
	// is set.
	Transcription TranscriptionOptions `yaml:"transcription"`
	// Speech speaks replies; on when enabled.
	Speech SpeechOptions `yaml:"speech"`
	// Reply says when an agent's reply is also sent as a voice message:
	// never (the default), always, or when_spoken_to (the person's message
	// was a voice message).
	Reply ReplyMode `yaml:"reply"`
	// MaxAudioBytes bounds an upload to the transcription endpoint and an
	// answer of the speech endpoint (default 25 MiB).
	MaxAudioBytes int64 `yaml:"max_audio_bytes"`
}

// TranscriptionOptions configure the speech-to-text endpoint.
type TranscriptionOptions struct {
	// BaseURL is the API's base URL, ending in /v1 for most servers, e.g.
	// http://127.0.0.1:8080/v1; the client appends /audio/transcriptions.
	BaseURL string `yaml:"base_url"`
	// Model is sent as the model field (default whisper-1; whisper.cpp's
	// server ignores it).
	Model string `yaml:"model"`
	// Language is the spoken language as an ISO-639-1 code ("" lets the
	// server detect it).
	Language string `yaml:"language"`
	// APIKey is sent as a bearer token when set.
	APIKey Secret `yaml:"api_key"`
	// Timeout bounds one request (default 60s).
	Timeout time.Duration `yaml:"timeout"`
}

// SpeechOptions configure the text-to-speech endpoint.
type SpeechOptions struct {
	Enabled bool `yaml:"enabled"`
	// BaseURL is the API's base URL; the client appends /audio/speech.
	BaseURL string `yaml:"base_url"`
	// Model is sent as the model field (default tts-1).
	Model string `yaml:"model"`
	// Voice is the server's voice name (default alloy).
	Voice string `yaml:"voice"`
	// Format is the response_format asked for (default opus: Ogg/Opus, what
	// Matrix clients record voice messages in); mp3, aac, flac, wav, pcm.
	Format string `yaml:"format"`
	APIKey Secret `yaml:"api_key"`
	// Timeout bounds one request (default 60s).
	Timeout time.Duration `yaml:"timeout"`
}

// ReplyMode says when a reply is spoken.
type ReplyMode string

// The reply modes; "" is Never.
const (
	Never        ReplyMode = "never"
	Always       ReplyMode = "always"
	WhenSpokenTo ReplyMode = "when_spoken_to"
)

// Secret is an API key: every fmt verb prints it masked, so it never ends
// up in a log line or an error by accident.
type Secret string

// String masks the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString masks the secret for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("voice.Secret(%q)", s.String()) }

// Format masks the secret for every verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// TranscriptionEnabled reports whether voice messages are transcribed.
func (o Options) TranscriptionEnabled() bool { return o.Transcription.BaseURL != "" }

// SpeechEnabled reports whether replies may be spoken.
func (o Options) SpeechEnabled() bool { return o.Speech.Enabled }

// SpeakReply reports whether a reply to a message is also spoken; spokenTo
// says whether that message was a voice message.
func (o Options) SpeakReply(spokenTo bool) bool {
	if !o.Speech.Enabled {
		return false
	}
	switch o.Reply {
	case Always:
		return true
	case WhenSpokenTo:
		return spokenTo
	}
	return false
}

// maxAudioBytes is MaxAudioBytes with its default.
func (o Options) maxAudioBytes() int64 {
	if o.MaxAudioBytes > 0 {
		return o.MaxAudioBytes
	}
	return DefaultMaxAudioBytes
}

var languagePattern = regexp.MustCompile(`^[a-z]{2,3}$`)

var speechFormats = map[string]string{
	"opus": "audio/ogg", "mp3": "audio/mpeg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm",
}

// Validate reports every problem of o at once, each naming its key.
func (o Options) Validate() error {
	var errs []error
	if o.TranscriptionEnabled() {
		if err := validateBaseURL(o.Transcription.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("transcription.base_url: %w", err))
		}
	} else if o.Transcription.Model != "" || o.Transcription.Language != "" || o.Transcription.APIKey != "" {
		errs = append(errs, errors.New("transcription: base_url is required when the section is set"))
	}
	if l := o.Transcription.Language; l != "" && !languagePattern.MatchString(l) {
		errs = append(errs, fmt.Errorf("transcription.language: %q is not an ISO-639-1 code such as en or de", l))
	}
	if o.Transcription.Timeout < 0 {
		errs = append(errs, errors.New("transcription.timeout: must not be negative"))
	}
	if o.Speech.Enabled {
		if err := validateBaseURL(o.Speech.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("speech.base_url: %w", err))
		}
	}
	if f := o.Speech.Format; f != "" {
		if _, ok := speechFormats[f]; !ok {
			errs = append(errs, fmt.Errorf("speech.format: %q is not one of opus, mp3, aac, flac, wav, pcm", f))
		}
	}
	if o.Speech.Timeout < 0 {
		errs = append(errs, errors.New("speech.timeout: must not be negative"))
	}
	switch o.Reply {
	case "", Never:
	case Always, WhenSpokenTo:
		if !o.Speech.Enabled {
			errs = append(errs, fmt.Errorf("reply: %s needs speech.enabled: true", o.Reply))
		}
	default:
		errs = append(errs, fmt.Errorf("reply: %q is not one of always, when_spoken_to, never", o.Reply))
	}
	if o.MaxAudioBytes < 0 {
		errs = append(errs, errors.New("max_audio_bytes: must not be negative"))
	}
	return errors.Join(errs...)
}

func validateBaseURL(s string) error {
	if s == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", redactURL(s))
	}
	if u.User != nil {
		return errors.New("must not carry credentials (use api_key)")
	}
	return nil
}

// redactURL returns s without credentials or query, for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
