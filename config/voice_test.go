package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
)

func TestVoice(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		c := mustParse(t, minimal, nil)
		if c.Voice.TranscriptionEnabled() || c.Voice.Speech.Enabled || !reflect.DeepEqual(c.Voice, config.Voice{}) {
			t.Fatalf("voice = %+v, want the zero value (off)", c.Voice)
		}
	})
	t.Run("full section decodes, the key from the environment", func(t *testing.T) {
		src := minimal + `voice:
  transcription:
    base_url: http://127.0.0.1:8080/v1
    model: whisper-large-v3
    language: de
    api_key: ${STT_KEY}
    timeout: 30s
  speech:
    enabled: true
    base_url: https://api.openai.com/v1
    model: tts-1-hd
    voice: nova
    format: mp3
    api_key: ${TTS_KEY}
    timeout: 20s
  reply: when_spoken_to
  max_audio_bytes: 10MiB
`
		c := mustParse(t, src, map[string]string{"STT_KEY": "stt-secret", "TTS_KEY": "tts-secret"})
		want := config.Voice{
			Transcription: config.VoiceTranscription{
				BaseURL: "http://127.0.0.1:8080/v1", Model: "whisper-large-v3", Language: "de",
				APIKey: "stt-secret", Timeout: config.Duration(30 * time.Second),
			},
			Speech: config.VoiceSpeech{
				Enabled: true, BaseURL: "https://api.openai.com/v1", Model: "tts-1-hd", Voice: "nova", Format: "mp3",
				APIKey: "tts-secret", Timeout: config.Duration(20 * time.Second),
			},
			Reply: config.VoiceReplyWhenSpokenTo, MaxAudioBytes: 10 * config.MiB,
		}
		if !reflect.DeepEqual(c.Voice, want) {
			t.Fatalf("voice =\n%+v\nwant\n%+v", c.Voice, want)
		}
		if !c.Voice.TranscriptionEnabled() {
			t.Error("TranscriptionEnabled = false, want true")
		}
		if masked := c.MaskSecrets("key stt-secret and tts-secret"); strings.Contains(masked, "secret") {
			t.Errorf("MaskSecrets left a voice key in %q", masked)
		}
	})
	tests := []struct {
		name string
		yaml string
		want []string
	}{{
		name: "transcription settings without base_url",
		yaml: "voice:\n  transcription:\n    model: whisper-1\n",
		want: []string{`config.yaml:4: voice.transcription.base_url: is required when voice.transcription is set`},
	}, {
		name: "bad urls",
		yaml: "voice:\n  transcription:\n    base_url: ftp://host/v1\n  speech:\n    enabled: true\n    base_url: http://user:pw@host/v1\n",
		want: []string{
			`config.yaml:5: voice.transcription.base_url: must be an http:// or https:// URL`,
			`config.yaml:8: voice.speech.base_url: must not contain credentials`,
		},
	}, {
		name: "speech enabled without base_url",
		yaml: "voice:\n  speech:\n    enabled: true\n",
		want: []string{`config.yaml:4: voice.speech.base_url: is required when voice.speech.enabled is true`},
	}, {
		name: "language, format, timeouts",
		yaml: "voice:\n  transcription:\n    base_url: http://h/v1\n    language: German\n    timeout: -1s\n  speech:\n    format: ogg\n    timeout: -2s\n",
		want: []string{
			`config.yaml:6: voice.transcription.language: "German" is not an ISO-639-1 code such as en or de`,
			`config.yaml:7: voice.transcription.timeout: must be positive, not -1s`,
			`config.yaml:9: voice.speech.format: must be one of "opus", "mp3", "aac", "flac", "wav", "pcm", not "ogg"`,
			`config.yaml:10: voice.speech.timeout: must be positive, not -2s`,
		},
	}, {
		name: "reply needs speech",
		yaml: "voice:\n  reply: always\n",
		want: []string{`config.yaml:4: voice.reply: "always" needs voice.speech.enabled: true`},
	}, {
		name: "unknown reply",
		yaml: "voice:\n  reply: sometimes\n",
		want: []string{`config.yaml:4: voice.reply: must be one of "never", "always", "when_spoken_to", not "sometimes"`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrors(t, minimal+tt.yaml, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("errors =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
