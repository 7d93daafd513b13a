package llmtest_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/agents/llmtest"
)

// upload posts a transcription request to srv with fields and a file part.
func upload(t *testing.T, srv *llmtest.Server, fields map[string]string, name, ctype string, data []byte) (*http.Response, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if name != "" {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+name+`"`)
		h.Set("Content-Type", ctype)
		pw, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = pw.Write(data)
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/audio/transcriptions", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func TestTranscriptionAnswersInTheRequestedFormat(t *testing.T) {
	clip := []byte("OggS\x00\x02fake opus \x00\xff bytes")
	cases := []struct {
		format, ctype, body string
	}{
		{"", "application/json", `{"text":"hello there"}`},
		{"json", "application/json", `{"text":"hello there"}`},
		{"text", "text/plain; charset=utf-8", `hello there`},
		{"verbose_json", "application/json", `{"task":"transcribe","language":"de","duration":1,"text":"hello there","segments":[]}`},
	}
	for _, tc := range cases {
		t.Run("format="+tc.format, func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.ScriptTranscriptions(llmtest.Transcription{Text: "hello there"})
			fields := map[string]string{"model": "whisper-1", "language": "de"}
			if tc.format != "" {
				fields["response_format"] = tc.format
			}
			resp, body := upload(t, srv, fields, "voice.ogg", "audio/ogg", clip)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || body != tc.body {
				t.Fatalf("got %d %q %q; want 200 %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.ctype, tc.body)
			}
			reqs := srv.AudioRequests()
			if len(reqs) != 1 {
				t.Fatalf("recorded %d requests; want 1", len(reqs))
			}
			r := reqs[0]
			if r.Path != "/v1/audio/transcriptions" || r.ContentType != "multipart/form-data" || r.Model != "whisper-1" ||
				r.Language != "de" || r.ResponseFormat != tc.format || r.FileName != "voice.ogg" ||
				r.FileContentType != "audio/ogg" || !bytes.Equal(r.File, clip) || r.Header.Get("Authorization") != "Bearer sk-test" {
				t.Fatalf("recorded %+v", r)
			}
		})
	}
}

func TestTranscriptionErrors(t *testing.T) {
	t.Run("scripted status", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		srv.ScriptTranscriptions(llmtest.Transcription{Status: 503})
		resp, body := upload(t, srv, map[string]string{"model": "m"}, "a.wav", "audio/wav", []byte("RIFF"))
		if resp.StatusCode != 503 || !strings.Contains(body, "Service Unavailable") {
			t.Fatalf("got %d %s", resp.StatusCode, body)
		}
	})
	t.Run("no file is a bad request", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		resp, body := upload(t, srv, map[string]string{"model": "m"}, "", "", nil)
		if resp.StatusCode != 400 || !strings.Contains(body, "missing file") {
			t.Fatalf("got %d %s", resp.StatusCode, body)
		}
		if r := srv.AudioRequests(); len(r) != 1 || r[0].Err == "" {
			t.Fatalf("recorded %+v; want the request with its error", r)
		}
	})
	t.Run("unscripted", func(t *testing.T) {
		srv := llmtest.New()
		defer srv.Close()
		resp, _ := upload(t, srv, map[string]string{"model": "m"}, "a.wav", "audio/wav", []byte("RIFF"))
		if resp.StatusCode != 500 || srv.Unscripted() != 1 {
			t.Fatalf("got %d, %d unscripted; want 500, 1", resp.StatusCode, srv.Unscripted())
		}
	})
}

func speak(t *testing.T, srv *llmtest.Server, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/audio/speech", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func TestSpeechSendsScriptedAudioOrSilence(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.ScriptSpeech(llmtest.Speech{Audio: []byte("OggS-scripted"), ContentType: "audio/ogg"}, llmtest.Speech{}, llmtest.Speech{})
	resp, out := speak(t, srv, `{"model":"tts-1","input":"Hello","voice":"alloy","response_format":"opus"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "audio/ogg" || string(out) != "OggS-scripted" {
		t.Fatalf("got %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	resp, out = speak(t, srv, `{"model":"tts-1","input":"Hello","voice":"alloy","response_format":"wav"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "audio/wav" || !bytes.Equal(out, llmtest.SilenceWAV()) {
		t.Fatalf("got %d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(out))
	}
	resp, out = speak(t, srv, `{"model":"tts-1","input":"Hello","voice":"alloy","response_format":"pcm"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "audio/pcm" || len(out) != len(llmtest.SilenceWAV())-44 {
		t.Fatalf("got %d %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(out))
	}
	r := srv.AudioRequests()[0]
	if r.Path != "/v1/audio/speech" || r.Model != "tts-1" || r.Input != "Hello" || r.Voice != "alloy" || r.ResponseFormat != "opus" || r.ContentType != "application/json" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestSpeechErrors(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.ScriptSpeech(llmtest.Speech{Status: 500, Body: `{"error":{"message":"boom"}}`})
	if resp, out := speak(t, srv, `{"model":"tts-1","input":"Hi"}`); resp.StatusCode != 500 || string(out) != `{"error":{"message":"boom"}}` {
		t.Fatalf("got %d %s", resp.StatusCode, out)
	}
	if resp, out := speak(t, srv, `{"model":"tts-1"}`); resp.StatusCode != 400 || !strings.Contains(string(out), "missing field") {
		t.Fatalf("got %d %s", resp.StatusCode, out)
	}
}

// SilenceWAV is a well-formed RIFF/WAVE file: its sizes add up and its
// format is 16-bit mono PCM.
func TestSilenceWAVIsWellFormed(t *testing.T) {
	b := llmtest.SilenceWAV()
	var h struct {
		Riff                      [4]byte
		Size                      uint32
		Wave, Fmt                 [4]byte
		FmtSize                   uint32
		Format, Channels          uint16
		Rate, ByteRate            uint32
		BlockAlign, BitsPerSample uint16
		Data                      [4]byte
		DataSize                  uint32
	}
	if err := binary.Read(bytes.NewReader(b), binary.LittleEndian, &h); err != nil {
		t.Fatal(err)
	}
	if string(h.Riff[:]) != "RIFF" || string(h.Wave[:]) != "WAVE" || string(h.Fmt[:]) != "fmt " || string(h.Data[:]) != "data" ||
		int(h.Size) != len(b)-8 || int(h.DataSize) != len(b)-44 || h.Format != 1 || h.Channels != 1 ||
		h.BitsPerSample != 16 || h.ByteRate != h.Rate*2 {
		t.Fatalf("bad header %+v (len %d)", h, len(b))
	}
}
