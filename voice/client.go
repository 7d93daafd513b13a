package voice

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"
)

// Audio is a recording to transcribe.
type Audio struct {
	Data []byte
	// FileName is sent with the upload; servers guess the format from its
	// extension (default "audio" with an extension for ContentType).
	FileName string
	// ContentType is the recording's MIME type (default audio/ogg, what
	// Matrix clients record voice messages in).
	ContentType string
}

// Speech is audio a Speaker made.
type Speech struct {
	Data []byte
	// ContentType is the audio's MIME type, e.g. audio/ogg.
	ContentType string
}

// Transcriber turns a recording into text. Transcribe is called once per
// voice message, before the message enters the pipeline; it must honour
// ctx and be safe for concurrent use.
type Transcriber interface {
	Transcribe(ctx context.Context, audio Audio) (string, error)
}

// Speaker turns a reply's text into audio. Speak is called once per spoken
// reply, after the text reply was sent; it must honour ctx and be safe for
// concurrent use.
type Speaker interface {
	Speak(ctx context.Context, text string) (Speech, error)
}

var (
	_ Transcriber = (*TranscriptionClient)(nil)
	_ Speaker     = (*SpeechClient)(nil)
)

// Errors a client returns (wrapped; test with errors.Is).
var (
	// ErrEmptyTranscript: the server heard nothing (silence, noise).
	ErrEmptyTranscript = errors.New("empty transcript")
	// ErrTooLarge: the recording, or the server's audio, exceeds
	// max_audio_bytes.
	ErrTooLarge = errors.New("audio too large")
	// ErrTextTooLong: the reply is longer than a speech endpoint takes
	// (4096 characters); the bot sends the text only.
	ErrTextTooLong = errors.New("text too long to speak")
	// ErrNoAudio: the speech endpoint answered with no audio.
	ErrNoAudio = errors.New("no audio in the answer")
)

// StatusError is an answer of an endpoint with an HTTP error status.
type StatusError struct {
	// Endpoint is the URL called (without credentials).
	Endpoint string
	Status   int
	// Message is the server's error message (or the start of its body),
	// with the API key removed should the server echo it.
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s answered HTTP %d", e.Endpoint, e.Status)
	}
	return fmt.Sprintf("%s answered HTTP %d: %s", e.Endpoint, e.Status, e.Message)
}

// endpoint is one OpenAI-compatible URL and how to call it.
type endpoint struct {
	url     string
	key     Secret
	timeout time.Duration
	hc      *http.Client
}

func newEndpoint(base, path string, key Secret, timeout time.Duration, hc *http.Client) endpoint {
	return endpoint{
		url:     strings.TrimRight(base, "/") + path,
		key:     key,
		timeout: cmp.Or(timeout, DefaultTimeout),
		hc:      cmp.Or(hc, http.DefaultClient),
	}
}

// post sends body to the endpoint and returns the answer's body (at most
// limit bytes, else ErrTooLarge) and content type. Every error names the
// endpoint and never holds the key.
func (e endpoint) post(ctx context.Context, ctype string, body []byte, limit int64) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, "", e.scrub(fmt.Errorf("failed to build a request to %s: %w", redactURL(e.url), err))
	}
	req.Header.Set("Content-Type", ctype)
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+string(e.key))
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no answer within %s: %w", e.timeout, context.DeadlineExceeded)
		}
		return nil, "", e.scrub(fmt.Errorf("failed to call %s: %w", redactURL(e.url), err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", e.scrub(fmt.Errorf("failed to read the answer of %s: %w", redactURL(e.url), err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, "", e.scrub(&StatusError{Endpoint: redactURL(e.url), Status: resp.StatusCode, Message: errorMessage(data)})
	}
	if int64(len(data)) > limit {
		return nil, "", fmt.Errorf("the answer of %s exceeds %d bytes: %w", redactURL(e.url), limit, ErrTooLarge)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// scrub removes the key from err's message, should anything have echoed
// it, keeping err's chain for errors.Is and errors.As.
func (e endpoint) scrub(err error) error {
	if e.key == "" || !strings.Contains(err.Error(), string(e.key)) {
		return err
	}
	var se *StatusError
	if errors.As(err, &se) {
		se.Message = strings.ReplaceAll(se.Message, string(e.key), "[redacted]")
	}
	return scrubbed{msg: strings.ReplaceAll(err.Error(), string(e.key), "[redacted]"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s scrubbed) Error() string { return s.msg }
func (s scrubbed) Unwrap() error { return s.err }

// errorMessage is the message of an OpenAI error object in body, else the
// start of body as text.
func errorMessage(body []byte) string {
	var eo struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &eo) == nil && len(eo.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(eo.Error, &obj) == nil && obj.Message != "":
			return truncate(obj.Message, maxErrorMessageBytes)
		case json.Unmarshal(eo.Error, &s) == nil:
			return truncate(s, maxErrorMessageBytes)
		}
	}
	if !utf8.Valid(body) {
		return ""
	}
	return truncate(strings.TrimSpace(string(body)), maxErrorMessageBytes)
}

// TranscriptionClient calls an OpenAI-compatible /audio/transcriptions
// endpoint. Safe for concurrent use.
type TranscriptionClient struct {
	ep       endpoint
	model    string
	language string
	max      int64
}

// NewTranscriber returns a client for o's transcription endpoint; hc nil
// uses http.DefaultClient. It fails when transcription is off or o is
// invalid.
func NewTranscriber(o Options, hc *http.Client) (*TranscriptionClient, error) {
	if !o.TranscriptionEnabled() {
		return nil, errors.New("failed to create a transcriber: transcription.base_url is not set")
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("failed to create a transcriber: %w", err)
	}
	t := o.Transcription
	return &TranscriptionClient{
		ep:       newEndpoint(t.BaseURL, "/audio/transcriptions", t.APIKey, t.Timeout, hc),
		model:    cmp.Or(t.Model, DefaultTranscriber),
		language: t.Language,
		max:      o.maxAudioBytes(),
	}, nil
}

// Transcribe uploads audio and returns its transcript, trimmed. An
// empty transcript is ErrEmptyTranscript, audio over max_audio_bytes
// ErrTooLarge (nothing is sent), an HTTP error status a *StatusError.
func (c *TranscriptionClient) Transcribe(ctx context.Context, a Audio) (string, error) {
	if int64(len(a.Data)) > c.max {
		return "", fmt.Errorf("failed to transcribe: the recording has %d bytes, more than max_audio_bytes %d: %w", len(a.Data), c.max, ErrTooLarge)
	}
	if len(a.Data) == 0 {
		return "", errors.New("failed to transcribe: the recording is empty")
	}
	ctype := cmp.Or(a.ContentType, "audio/ogg")
	name := cmp.Or(a.FileName, "audio"+extension(ctype))
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("model", c.model)
	if c.language != "" {
		_ = mw.WriteField("language", c.language)
	}
	_ = mw.WriteField("response_format", "json")
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": name}))
	h.Set("Content-Type", ctype)
	part, err := mw.CreatePart(h)
	if err != nil {
		return "", fmt.Errorf("failed to transcribe: %w", err)
	}
	_, _ = part.Write(a.Data)
	if err := mw.Close(); err != nil {
		return "", fmt.Errorf("failed to transcribe: %w", err)
	}
	data, rtype, err := c.ep.post(ctx, mw.FormDataContentType(), body.Bytes(), 4<<20)
	if err != nil {
		return "", fmt.Errorf("failed to transcribe: %w", err)
	}
	text, err := decodeTranscript(data, rtype)
	if err != nil {
		return "", fmt.Errorf("failed to transcribe: the answer of %s: %w", redactURL(c.ep.url), err)
	}
	if text = strings.TrimSpace(text); text == "" {
		return "", fmt.Errorf("failed to transcribe with %s: %w", redactURL(c.ep.url), ErrEmptyTranscript)
	}
	return text, nil
}

// decodeTranscript reads {"text": …}, or a text/plain body.
func decodeTranscript(data []byte, ctype string) (string, error) {
	mt, _, _ := mime.ParseMediaType(ctype)
	if mt == "text/plain" {
		if !utf8.Valid(data) {
			return "", errors.New("the transcript is not UTF-8")
		}
		return string(data), nil
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("not a transcription object: %w", err)
	}
	if out.Text == nil {
		return "", errors.New("no text field")
	}
	return *out.Text, nil
}

// SpeechClient calls an OpenAI-compatible /audio/speech endpoint. Safe
// for concurrent use.
type SpeechClient struct {
	ep     endpoint
	model  string
	voice  string
	format string
	max    int64
}

// NewSpeaker returns a client for o's speech endpoint; hc nil uses
// http.DefaultClient. It fails when speech is off or o is invalid.
func NewSpeaker(o Options, hc *http.Client) (*SpeechClient, error) {
	if !o.SpeechEnabled() {
		return nil, errors.New("failed to create a speaker: speech.enabled is false")
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("failed to create a speaker: %w", err)
	}
	s := o.Speech
	return &SpeechClient{
		ep:     newEndpoint(s.BaseURL, "/audio/speech", s.APIKey, s.Timeout, hc),
		model:  cmp.Or(s.Model, DefaultSpeechModel),
		voice:  cmp.Or(s.Voice, DefaultVoice),
		format: cmp.Or(s.Format, DefaultSpeechFormat),
		max:    o.maxAudioBytes(),
	}, nil
}

// Speak returns text spoken. Text over 4096 characters is ErrTextTooLong
// (nothing is sent), an answer over max_audio_bytes ErrTooLarge, an empty
// one ErrNoAudio. The content type is the server's when it names an audio
// type, else the one of the requested format.
func (c *SpeechClient) Speak(ctx context.Context, text string) (Speech, error) {
	text = strings.TrimSpace(text)
	if n := utf8.RuneCountInString(text); n > maxSpeechInputRunes {
		return Speech{}, fmt.Errorf("failed to speak: %d characters, at most %d: %w", n, maxSpeechInputRunes, ErrTextTooLong)
	}
	if text == "" {
		return Speech{}, errors.New("failed to speak: no text")
	}
	body, _ := json.Marshal(struct {
		Model          string `json:"model"`
		Input          string `json:"input"`
		Voice          string `json:"voice"`
		ResponseFormat string `json:"response_format"`
	}{c.model, text, c.voice, c.format})
	data, ctype, err := c.ep.post(ctx, "application/json", body, c.max)
	if err != nil {
		return Speech{}, fmt.Errorf("failed to speak: %w", err)
	}
	if len(data) == 0 {
		return Speech{}, fmt.Errorf("failed to speak with %s: %w", redactURL(c.ep.url), ErrNoAudio)
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	if !strings.HasPrefix(mt, "audio/") {
		mt = speechFormats[c.format]
	}
	return Speech{Data: data, ContentType: mt}, nil
}

// extension is a file extension for an audio MIME type.
func extension(ctype string) string {
	mt, _, _ := mime.ParseMediaType(ctype)
	switch mt {
	case "audio/ogg", "audio/opus":
		return ".ogg"
	case "audio/mpeg", "audio/mp3":
		return ".mp3"
	case "audio/mp4", "audio/m4a", "audio/x-m4a", "audio/aac":
		return ".m4a"
	case "audio/wav", "audio/x-wav", "audio/wave":
		return ".wav"
	case "audio/webm":
		return ".webm"
	case "audio/flac":
		return ".flac"
	}
	return ".ogg"
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
