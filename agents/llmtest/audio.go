package llmtest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// Audio endpoints: POST /v1/audio/transcriptions (speech to text, a
// multipart upload) and POST /v1/audio/speech (text to speech, a JSON body),
// in OpenAI's wire format, which whisper.cpp's server, the faster-whisper
// servers, Groq and OpenAI share. Each takes the next reply of its own
// script (ScriptTranscriptions, ScriptSpeech); a request with no reply left
// gets HTTP 500 and is counted as unscripted, like a chat request.

// maxAudioUpload bounds what the server reads of a transcription upload.
const maxAudioUpload = 64 << 20

// Transcription is one scripted answer of /v1/audio/transcriptions. The
// zero value answers an empty transcript.
type Transcription struct {
	// Text is the transcript, sent as the response format asks: {"text":…}
	// for json (the default), the bare text for text, with language and
	// duration for verbose_json.
	Text string
	// Status, when 400 or more, answers with this HTTP status and Body (or
	// an OpenAI error object carrying the status text) instead.
	Status int
	Body   string
	// Garbage, when set, is sent verbatim as a 200 application/json body
	// instead of a transcript: a server that answers nonsense.
	Garbage string
	// Delay waits before the response, or until the client gives up.
	Delay time.Duration
}

// Speech is one scripted answer of /v1/audio/speech. The zero value
// answers a generated WAV clip of silence (SilenceWAV), or the raw PCM
// samples when the request asks for response_format "pcm".
type Speech struct {
	// Audio is the body to send; empty sends generated silence.
	Audio []byte
	// ContentType of Audio (default "audio/wav", or the generated clip's).
	ContentType string
	// Status, when 400 or more, answers with this HTTP status and Body (or
	// an OpenAI error object carrying the status text) instead.
	Status int
	Body   string
	// Delay waits before the response, or until the client gives up.
	Delay time.Duration
}

// AudioRequest is a request one of the audio endpoints received.
type AudioRequest struct {
	Path string
	// Header holds the request headers (Authorization included).
	Header http.Header
	// ContentType is the request's media type (multipart/form-data for a
	// transcription, application/json for speech).
	ContentType string
	// Model is the model field of either endpoint.
	Model string

	// Transcription: the multipart fields and the uploaded file as
	// received, byte for byte, with its file name and content type.
	Language        string
	ResponseFormat  string
	Prompt          string
	FileName        string
	FileContentType string
	File            []byte
	// Fields holds every non-file multipart field.
	Fields map[string][]string

	// Speech: the JSON body's fields, and the body as received.
	Input string
	Voice string
	Raw   []byte

	// Err says what was wrong with a request the server answered with 400
	// ("" for a well-formed one).
	Err string
}

// audioState is the server's audio script and record.
type audioState struct {
	transcriptions []Transcription
	speech         []Speech
	requests       []AudioRequest
}

// routeAudio registers the audio endpoints on mux.
func (s *Server) routeAudio(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/audio/transcriptions", s.handleTranscription)
	mux.HandleFunc("POST /audio/transcriptions", s.handleTranscription)
	mux.HandleFunc("POST /v1/audio/speech", s.handleSpeech)
	mux.HandleFunc("POST /audio/speech", s.handleSpeech)
}

// ScriptTranscriptions appends answers for /v1/audio/transcriptions.
func (s *Server) ScriptTranscriptions(replies ...Transcription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audio.transcriptions = append(s.audio.transcriptions, replies...)
}

// ScriptSpeech appends answers for /v1/audio/speech.
func (s *Server) ScriptSpeech(replies ...Speech) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audio.speech = append(s.audio.speech, replies...)
}

// AudioRequests returns the requests the audio endpoints received so far,
// in order of arrival (kept in Instant mode too).
func (s *Server) AudioRequests() []AudioRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AudioRequest(nil), s.audio.requests...)
}

// recordAudio records req and, for a well-formed one, takes the next reply
// of script; ok is false when there is none (counted as unscripted).
func recordAudio[R any](s *Server, req AudioRequest, script *[]R) (reply R, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audio.requests = append(s.audio.requests, req)
	if req.Err != "" {
		return reply, false
	}
	if len(*script) == 0 {
		s.unscripted++
		return reply, false
	}
	reply = (*script)[0]
	*script = (*script)[1:]
	return reply, true
}

func (s *Server) handleTranscription(w http.ResponseWriter, r *http.Request) {
	req := AudioRequest{Path: r.URL.Path, Header: r.Header.Clone(), Fields: map[string][]string{}}
	req.ContentType, _, _ = mime.ParseMediaType(r.Header.Get("Content-Type"))
	r.Body = http.MaxBytesReader(w, r.Body, maxAudioUpload)
	if err := r.ParseMultipartForm(maxAudioUpload); err != nil {
		req.Err = "request is not a multipart form: " + err.Error()
	} else {
		for k, vs := range r.MultipartForm.Value {
			req.Fields[k] = append([]string(nil), vs...)
		}
		req.Model = r.FormValue("model")
		req.Language = r.FormValue("language")
		req.ResponseFormat = r.FormValue("response_format")
		req.Prompt = r.FormValue("prompt")
		req.Err = readUpload(r, &req)
		if req.Err == "" && req.Model == "" {
			req.Err = "missing field model"
		}
	}
	reply, ok := recordAudio(s, req, &s.audio.transcriptions)
	if !s.audioPreamble(w, r, req, ok, "transcription", reply.Delay, reply.Status, reply.Body) {
		return
	}
	if reply.Garbage != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply.Garbage)
		return
	}
	switch cmp.Or(req.ResponseFormat, "json") {
	case "json":
		b, _ := json.Marshal(struct {
			Text string `json:"text"`
		}{reply.Text})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case "verbose_json":
		b, _ := json.Marshal(struct {
			Task     string   `json:"task"`
			Language string   `json:"language"`
			Duration float64  `json:"duration"`
			Text     string   `json:"text"`
			Segments []string `json:"segments"`
		}{"transcribe", cmp.Or(req.Language, "english"), 1, reply.Text, []string{}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, reply.Text)
	default:
		writeError(w, http.StatusBadRequest, openAIError(http.StatusBadRequest, "llmtest: unsupported response_format "+req.ResponseFormat))
	}
}

// readUpload reads the multipart field "file" into req, or says what is
// wrong with it.
func readUpload(r *http.Request, req *AudioRequest) string {
	f, hdr, err := r.FormFile("file")
	if err != nil {
		return "missing file: " + err.Error()
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "failed to read file: " + err.Error()
	}
	req.File, req.FileName, req.FileContentType = data, hdr.Filename, hdr.Header.Get("Content-Type")
	return ""
}

func (s *Server) handleSpeech(w http.ResponseWriter, r *http.Request) {
	req := AudioRequest{Path: r.URL.Path, Header: r.Header.Clone()}
	req.ContentType, _, _ = mime.ParseMediaType(r.Header.Get("Content-Type"))
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxAudioUpload))
	req.Raw = raw
	var body struct {
		Model          string   `json:"model"`
		Input          string   `json:"input"`
		Voice          string   `json:"voice"`
		ResponseFormat string   `json:"response_format"`
		Speed          *float64 `json:"speed"`
	}
	switch {
	case err != nil:
		req.Err = "failed to read body: " + err.Error()
	case json.Unmarshal(raw, &body) != nil:
		req.Err = "request body is not a JSON object"
	case body.Model == "" || body.Input == "":
		req.Err = "missing field model or input"
	}
	req.Model, req.Input, req.Voice, req.ResponseFormat = body.Model, body.Input, body.Voice, body.ResponseFormat
	reply, ok := recordAudio(s, req, &s.audio.speech)
	if !s.audioPreamble(w, r, req, ok, "speech", reply.Delay, reply.Status, reply.Body) {
		return
	}
	audio, ctype := reply.Audio, cmp.Or(reply.ContentType, "audio/wav")
	if len(audio) == 0 {
		if req.ResponseFormat == "pcm" {
			audio, ctype = silencePCM(), "audio/pcm"
		} else {
			audio, ctype = SilenceWAV(), "audio/wav"
		}
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", fmt.Sprint(len(audio)))
	_, _ = w.Write(audio)
}

// openAIError is an OpenAI error object with message.
func openAIError(status int, message string) string {
	var eo errorObject
	eo.Error.Type, eo.Error.Message = "invalid_request_error", message
	if status >= 500 {
		eo.Error.Type = "server_error"
	}
	b, _ := json.Marshal(eo)
	return string(b)
}

// Silence parameters: 0.2 s of 16-bit mono PCM at 24 kHz, OpenAI's speech
// output rate.
const (
	silenceRate    = 24000
	silenceSamples = silenceRate / 5
)

func silencePCM() []byte { return make([]byte, 2*silenceSamples) }

// SilenceWAV returns a valid RIFF/WAVE file holding 0.2 s of silence
// (16-bit mono PCM at 24 kHz): what /v1/audio/speech sends when its reply
// has no Audio. The bytes are the same on every call.
func SilenceWAV() []byte {
	pcm := silencePCM()
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + len(pcm)))
	b.WriteString("WAVEfmt ")
	le(uint32(16))              // fmt chunk size
	le(uint16(1))               // PCM
	le(uint16(1))               // mono
	le(uint32(silenceRate))     // sample rate
	le(uint32(silenceRate * 2)) // byte rate
	le(uint16(2))               // block align
	le(uint16(16))              // bits per sample
	b.WriteString("data")
	le(uint32(len(pcm)))
	b.Write(pcm)
	return b.Bytes()
}

// audioPreamble answers what comes before a scripted audio reply's body: a
// bad request, no scripted reply, the reply's delay, a scripted error
// status. It reports whether the handler goes on to write the reply.
func (s *Server) audioPreamble(w http.ResponseWriter, r *http.Request, req AudioRequest, scripted bool, what string, delay time.Duration, status int, body string) bool {
	switch {
	case req.Err != "":
		writeError(w, http.StatusBadRequest, openAIError(http.StatusBadRequest, "llmtest: "+req.Err))
		return false
	case !scripted:
		writeError(w, http.StatusInternalServerError, openAIError(http.StatusInternalServerError, "llmtest: no scripted "+what+" for this request"))
		return false
	}
	if !s.opts.instant && delay > 0 && !sleep(r.Context(), delay) {
		return false
	}
	if status >= 400 {
		writeError(w, status, cmp.Or(body, openAIError(status, http.StatusText(status))))
		return false
	}
	return true
}
