package voice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/voice"
)

const key = "sk-very-secret-key-123"

func transcriber(t *testing.T, srv *llmtest.Server, mod func(*voice.Options)) *voice.TranscriptionClient {
	t.Helper()
	o := voice.Options{Transcription: voice.TranscriptionOptions{BaseURL: srv.URL, Model: "whisper-large-v3", Language: "de", APIKey: key}}
	if mod != nil {
		mod(&o)
	}
	c, err := voice.NewTranscriber(o, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTranscribeSendsTheRecordingUnchanged(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.ScriptTranscriptions(llmtest.Transcription{Text: "  Hallo, wie geht's?\n"})
	clip := append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{0, 0xff, 0x80, '\r', '\n'}, 1000)...)
	got, err := transcriber(t, srv, nil).Transcribe(t.Context(), voice.Audio{Data: clip, FileName: "Voice message.ogg", ContentType: "audio/ogg"})
	if err != nil {
		t.Fatal(err)
	}
	if got != "Hallo, wie geht's?" {
		t.Errorf("transcript %q; want it trimmed", got)
	}
	reqs := srv.AudioRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests; want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/audio/transcriptions" || r.ContentType != "multipart/form-data" {
		t.Errorf("request %s %s", r.Path, r.ContentType)
	}
	if r.Model != "whisper-large-v3" || r.Language != "de" || r.ResponseFormat != "json" {
		t.Errorf("fields model=%q language=%q response_format=%q", r.Model, r.Language, r.ResponseFormat)
	}
	if r.FileName != "Voice message.ogg" || r.FileContentType != "audio/ogg" || !bytes.Equal(r.File, clip) {
		t.Errorf("file %q %q, %d bytes (equal: %v)", r.FileName, r.FileContentType, len(r.File), bytes.Equal(r.File, clip))
	}
	if r.Header.Get("Authorization") != "Bearer "+key {
		t.Errorf("Authorization %q", r.Header.Get("Authorization"))
	}
}

func TestTranscribeDefaults(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.ScriptTranscriptions(llmtest.Transcription{Text: "hi"})
	c := transcriber(t, srv, func(o *voice.Options) { o.Transcription = voice.TranscriptionOptions{BaseURL: srv.URL + "/"} })
	if _, err := c.Transcribe(t.Context(), voice.Audio{Data: []byte("x"), ContentType: "audio/mp4"}); err != nil {
		t.Fatal(err)
	}
	r := srv.AudioRequests()[0]
	if r.Model != voice.DefaultTranscriber || r.FileName != "audio.m4a" || r.FileContentType != "audio/mp4" || r.Header.Get("Authorization") != "" {
		t.Errorf("got model %q file %q %q auth %q", r.Model, r.FileName, r.FileContentType, r.Header.Get("Authorization"))
	}
	if _, ok := r.Fields["language"]; ok {
		t.Errorf("language sent though not configured: %v", r.Fields)
	}
}

func TestTranscribeErrors(t *testing.T) {
	cases := []struct {
		name   string
		reply  llmtest.Transcription
		mod    func(*voice.Options)
		data   int
		sent   bool
		is     error
		status int
		want   string
	}{
		{name: "server error", reply: llmtest.Transcription{Status: 500, Body: `{"error":{"message":"model crashed"}}`}, sent: true, status: 500, want: "/v1/audio/transcriptions answered HTTP 500: model crashed"},
		{name: "key echoed", reply: llmtest.Transcription{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: ` + key + `"}}`}, sent: true, status: 401, want: "Incorrect API key provided: [redacted]"},
		{name: "plain error body", reply: llmtest.Transcription{Status: 502, Body: "bad gateway " + key}, sent: true, status: 502, want: "bad gateway [redacted]"},
		{name: "empty transcript", reply: llmtest.Transcription{Text: " \n "}, sent: true, is: voice.ErrEmptyTranscript, want: "empty transcript"},
		{name: "garbage", reply: llmtest.Transcription{Garbage: "<html>oops"}, sent: true, want: "the answer of " + "http://"},
		{name: "no text field", reply: llmtest.Transcription{Garbage: `{"txt":"x"}`}, sent: true, want: "no text field"},
		{name: "oversize", mod: func(o *voice.Options) { o.MaxAudioBytes = 99 }, data: 100, is: voice.ErrTooLarge, want: "100 bytes, more than max_audio_bytes 99"},
		{name: "timeout", reply: llmtest.Transcription{Text: "late", Delay: time.Minute}, mod: func(o *voice.Options) { o.Transcription.Timeout = 50 * time.Millisecond },
			sent: true, is: context.DeadlineExceeded, want: "no answer within 50ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New()
			t.Cleanup(srv.Close)
			srv.ScriptTranscriptions(tc.reply)
			c := transcriber(t, srv, tc.mod)
			_, err := c.Transcribe(t.Context(), voice.Audio{Data: make([]byte, max(tc.data, 10))})
			if err == nil {
				t.Fatal("no error")
			}
			msg := fmt.Sprintf("%v %+v %#v", err, err, err)
			if strings.Contains(msg, key) {
				t.Errorf("error holds the API key: %s", msg)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to contain %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v; want errors.Is %v", err, tc.is)
			}
			var se *voice.StatusError
			if tc.status != 0 && (!errors.As(err, &se) || se.Status != tc.status || strings.Contains(se.Message, key)) {
				t.Errorf("error %v; want a *StatusError %d without the key", err, tc.status)
			}
			if sent := len(srv.AudioRequests()) > 0; sent != tc.sent {
				t.Errorf("request sent: %v; want %v", sent, tc.sent)
			}
		})
	}
}

// A server that is down: the error names the endpoint.
func TestTranscribeServerDown(t *testing.T) {
	srv := llmtest.New()
	c := transcriber(t, srv, nil)
	srv.Close()
	_, err := c.Transcribe(t.Context(), voice.Audio{Data: []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "failed to transcribe: failed to call "+srv.URL+"/audio/transcriptions") || strings.Contains(err.Error(), key) {
		t.Fatalf("error %v; want failed to call <endpoint>", err)
	}
}

func speaker(t *testing.T, srv *llmtest.Server, mod func(*voice.Options)) *voice.SpeechClient {
	t.Helper()
	o := voice.Options{Speech: voice.SpeechOptions{Enabled: true, BaseURL: srv.URL, Model: "kokoro", Voice: "af_sky", APIKey: key}}
	if mod != nil {
		mod(&o)
	}
	c, err := voice.NewSpeaker(o, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSpeak(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.ScriptSpeech(llmtest.Speech{Audio: []byte("OggS audio"), ContentType: "audio/ogg"}, llmtest.Speech{Audio: []byte("ID3"), ContentType: "application/octet-stream"})
	s, err := speaker(t, srv, nil).Speak(t.Context(), " Hello there. ")
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data) != "OggS audio" || s.ContentType != "audio/ogg" {
		t.Errorf("speech %q %q", s.Data, s.ContentType)
	}
	r := srv.AudioRequests()[0]
	if r.Path != "/v1/audio/speech" || r.ContentType != "application/json" || r.Model != "kokoro" || r.Input != "Hello there." ||
		r.Voice != "af_sky" || r.ResponseFormat != "opus" || r.Header.Get("Authorization") != "Bearer "+key {
		t.Errorf("request %+v", r)
	}
	// A server that names no audio type: the type of the requested format.
	s, err = speaker(t, srv, func(o *voice.Options) { o.Speech.Format = "mp3" }).Speak(t.Context(), "Hi")
	if err != nil || s.ContentType != "audio/mpeg" {
		t.Errorf("speech %q %v; want audio/mpeg", s.ContentType, err)
	}
}

func TestSpeakErrors(t *testing.T) {
	cases := []struct {
		name  string
		reply llmtest.Speech
		mod   func(*voice.Options)
		text  string
		sent  bool
		is    error
		want  string
	}{
		{name: "server error", reply: llmtest.Speech{Status: 500}, text: "hi", sent: true, want: "answered HTTP 500: Internal Server Error"},
		{name: "answer too large", reply: llmtest.Speech{Audio: make([]byte, 101)}, mod: func(o *voice.Options) { o.MaxAudioBytes = 100 }, text: "hi", sent: true, is: voice.ErrTooLarge},
		{name: "text too long", text: strings.Repeat("é", 4097), is: voice.ErrTextTooLong},
		{name: "timeout", reply: llmtest.Speech{Delay: time.Minute}, mod: func(o *voice.Options) { o.Speech.Timeout = 50 * time.Millisecond }, text: "hi", sent: true, is: context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New()
			t.Cleanup(srv.Close)
			srv.ScriptSpeech(tc.reply)
			_, err := speaker(t, srv, tc.mod).Speak(t.Context(), tc.text)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(fmt.Sprintf("%v %#v", err, err), key) {
				t.Errorf("error holds the API key: %v", err)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to contain %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v; want errors.Is %v", err, tc.is)
			}
			if sent := len(srv.AudioRequests()) > 0; sent != tc.sent {
				t.Errorf("request sent: %v; want %v", sent, tc.sent)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		o    voice.Options
		want string // "" for valid
	}{
		{"zero value is off and valid", voice.Options{}, ""},
		{"transcription only", voice.Options{Transcription: voice.TranscriptionOptions{BaseURL: "http://127.0.0.1:8080/v1", Language: "en"}}, ""},
		{"speech with reply", voice.Options{Speech: voice.SpeechOptions{Enabled: true, BaseURL: "https://api.openai.com/v1"}, Reply: voice.WhenSpokenTo}, ""},
		{"model without base_url", voice.Options{Transcription: voice.TranscriptionOptions{Model: "whisper-1"}}, "transcription: base_url is required"},
		{"bad base_url", voice.Options{Transcription: voice.TranscriptionOptions{BaseURL: "ftp://x"}}, `transcription.base_url: "ftp://x" is not an http(s) URL`},
		{"credentials in base_url", voice.Options{Transcription: voice.TranscriptionOptions{BaseURL: "http://u:pw@x/v1"}}, "transcription.base_url: must not carry credentials"},
		{"bad language", voice.Options{Transcription: voice.TranscriptionOptions{BaseURL: "http://x", Language: "English"}}, `transcription.language: "English" is not an ISO-639-1 code`},
		{"speech without base_url", voice.Options{Speech: voice.SpeechOptions{Enabled: true}}, "speech.base_url: is required"},
		{"bad format", voice.Options{Speech: voice.SpeechOptions{Format: "ogg"}}, `speech.format: "ogg" is not one of`},
		{"reply needs speech", voice.Options{Reply: voice.Always}, "reply: always needs speech.enabled: true"},
		{"bad reply", voice.Options{Reply: "sometimes"}, `reply: "sometimes" is not one of always, when_spoken_to, never`},
		{"negative size", voice.Options{MaxAudioBytes: -1}, "max_audio_bytes: must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want %q", err, tc.want)
			}
		})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	o := voice.Options{Transcription: voice.TranscriptionOptions{BaseURL: "http://x", APIKey: key}}
	for _, s := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%s %q %x", o.Transcription.APIKey, o.Transcription.APIKey, o.Transcription.APIKey)} {
		if strings.Contains(s, key) || strings.Contains(s, fmt.Sprintf("%x", key)) {
			t.Errorf("printed the key: %s", s)
		}
	}
}

func TestSpeakReply(t *testing.T) {
	on := voice.SpeechOptions{Enabled: true, BaseURL: "http://x"}
	cases := []struct {
		o                voice.Options
		spoken, unspoken bool
	}{
		{voice.Options{}, false, false},
		{voice.Options{Speech: on}, false, false},
		{voice.Options{Speech: on, Reply: voice.Never}, false, false},
		{voice.Options{Speech: on, Reply: voice.Always}, true, true},
		{voice.Options{Speech: on, Reply: voice.WhenSpokenTo}, true, false},
		{voice.Options{Reply: voice.Always}, false, false},
	}
	for _, tc := range cases {
		if got := tc.o.SpeakReply(true); got != tc.spoken {
			t.Errorf("%+v SpeakReply(true) = %v", tc.o.Reply, got)
		}
		if got := tc.o.SpeakReply(false); got != tc.unspoken {
			t.Errorf("%+v SpeakReply(false) = %v", tc.o.Reply, got)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		c    *event.MessageEventContent
		want voice.Kind
	}{
		{"nil", nil, voice.NotAudio},
		{"text", &event.MessageEventContent{MsgType: event.MsgText, Body: "hi"}, voice.NotAudio},
		{"file", &event.MessageEventContent{MsgType: event.MsgFile, URL: "mxc://x/y", Info: &event.FileInfo{MimeType: "audio/ogg"}}, voice.NotAudio},
		{"audio", &event.MessageEventContent{MsgType: event.MsgAudio, URL: "mxc://x/y"}, voice.AudioFile},
		{"audio without a file", &event.MessageEventContent{MsgType: event.MsgAudio}, voice.NotAudio},
		{"voice note", &event.MessageEventContent{MsgType: event.MsgAudio, URL: "mxc://x/y", MSC3245Voice: &event.MSC3245Voice{}, MSC1767Audio: &event.MSC1767Audio{Duration: 1200}}, voice.VoiceNote},
		{"encrypted voice note", &event.MessageEventContent{MsgType: event.MsgAudio, File: &event.EncryptedFileInfo{URL: "mxc://x/y"}, MSC3245Voice: &event.MSC3245Voice{}}, voice.VoiceNote},
		{"extensible audio", &event.MessageEventContent{MsgType: "org.matrix.custom", URL: "mxc://x/y", MSC1767Audio: &event.MSC1767Audio{}}, voice.AudioFile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := voice.Classify(tc.c); got != tc.want {
				t.Fatalf("Classify = %v; want %v", got, tc.want)
			}
			if voice.IsAudio(tc.c) != (tc.want != voice.NotAudio) {
				t.Fatal("IsAudio disagrees with Classify")
			}
		})
	}
}

func TestAudioOf(t *testing.T) {
	c := &event.MessageEventContent{MsgType: event.MsgAudio, Body: "Voice message.ogg", Info: &event.FileInfo{MimeType: "audio/ogg"}}
	if a := voice.AudioOf(c, []byte("d")); a.FileName != "Voice message.ogg" || a.ContentType != "audio/ogg" || string(a.Data) != "d" {
		t.Errorf("AudioOf = %+v", a)
	}
	c = &event.MessageEventContent{MsgType: event.MsgAudio, Body: "a caption", FileName: "../../etc/rec.m4a"}
	if a := voice.AudioOf(c, nil); a.FileName != "rec.m4a" || a.ContentType != "" {
		t.Errorf("AudioOf = %+v; want the base name, no type", a)
	}
	if a := voice.AudioOf(&event.MessageEventContent{Body: "no extension"}, nil); a.FileName != "" {
		t.Errorf("AudioOf took a caption for a file name: %+v", a)
	}
}

func TestTranscriptText(t *testing.T) {
	if got := voice.TranscriptText("  hello \n"); got != "🎤 hello" {
		t.Errorf("TranscriptText = %q", got)
	}
	long := strings.Repeat("ä", voice.MaxTranscriptBytes) // 2 bytes each
	got := voice.TranscriptText(long)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > len("🎤 ")+voice.MaxTranscriptBytes {
		t.Errorf("TranscriptText of a long text: %d bytes, valid %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-6:])
	}
}

func TestReplyContent(t *testing.T) {
	wav := llmtest.SilenceWAV()
	c := voice.ReplyContent(voice.Speech{Data: wav, ContentType: "audio/wav"}, "Hello")
	if c.MsgType != event.MsgAudio || c.Body != "Hello" || c.MSC3245Voice == nil || c.Info.MimeType != "audio/wav" ||
		c.Info.Size != len(wav) || c.Info.Duration != 200 || c.MSC1767Audio.Duration != 200 || c.FileName != "reply.wav" {
		t.Errorf("ReplyContent = %+v info %+v audio %+v", c, c.Info, c.MSC1767Audio)
	}
	if c := voice.ReplyContent(voice.Speech{Data: []byte("ID3xxx"), ContentType: "audio/mpeg"}, "x"); c.Info.Duration != 0 {
		t.Errorf("duration %d for audio of unknown length", c.Info.Duration)
	}
}
