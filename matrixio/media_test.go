package matrixio

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// mediaServer serves one file under both download APIs, or only the legacy
// one (v1 answers like a server of Matrix 1.10 that does not know it).
type mediaServer struct {
	mu     sync.Mutex
	paths  []string
	auth   []string
	data   []byte
	noV1   bool
	noSize bool // chunked answer without Content-Length
}

func (s *mediaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	const v1, legacy = "/_matrix/client/v1/media/download/example.org/", "/_matrix/media/v3/download/example.org/"
	var file string
	switch {
	case strings.HasPrefix(r.URL.Path, v1) && s.noV1:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errcode":"M_UNRECOGNIZED","error":"Unrecognized request"}`))
		return
	case strings.HasPrefix(r.URL.Path, v1):
		file = strings.TrimPrefix(r.URL.Path, v1)
	case strings.HasPrefix(r.URL.Path, legacy):
		file = strings.TrimPrefix(r.URL.Path, legacy)
	}
	if file != "file" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errcode":"M_NOT_FOUND","error":"no such media"}`))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if !s.noSize {
		w.Header().Set("Content-Length", strconv.Itoa(len(s.data)))
	}
	_, _ = w.Write(s.data)
	if s.noSize {
		w.(http.Flusher).Flush()
	}
}

func TestDownload(t *testing.T) {
	plain := []byte("hello, this is the file")
	enc := attachment.NewEncryptedFile()
	cipher := bytes.Clone(plain)
	enc.EncryptInPlace(cipher)
	// What a receiving client has: the key material from the event, not
	// the struct that encrypted (which caches its decoded key).
	var wire event.EncryptedFileInfo
	if err := json.Unmarshal(mustJSON(t, event.EncryptedFileInfo{EncryptedFile: *enc, URL: "mxc://example.org/file"}), &wire); err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(cipher)
	tampered[0] ^= 1

	uri := id.ContentURI{Homeserver: "example.org", FileID: "file"}
	tests := []struct {
		name      string
		srv       *mediaServer
		ref       MediaRef
		limit     int64
		want      []byte
		wantErr   error // errors.Is
		wantPaths []string
	}{{
		name: "authenticated media", srv: &mediaServer{data: plain}, ref: MediaRef{URI: uri}, limit: 100, want: plain,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file"},
	}, {
		name: "legacy fallback when the server lacks v1", srv: &mediaServer{data: plain, noV1: true}, ref: MediaRef{URI: uri}, limit: 100, want: plain,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file", "/_matrix/media/v3/download/example.org/file"},
	}, {
		name: "unknown media is not retried on the legacy API", srv: &mediaServer{data: plain}, ref: MediaRef{URI: id.ContentURI{Homeserver: "example.org", FileID: "nope"}}, limit: 100,
		wantErr:   mautrix.MNotFound,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/nope"},
	}, {
		name: "exactly at the limit", srv: &mediaServer{data: plain}, ref: MediaRef{URI: uri}, limit: int64(len(plain)), want: plain,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file"},
	}, {
		name: "over the limit by its length", srv: &mediaServer{data: plain}, ref: MediaRef{URI: uri}, limit: int64(len(plain)) - 1,
		wantErr:   ErrMediaTooLarge,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file"},
	}, {
		name: "over the limit without a length", srv: &mediaServer{data: plain, noSize: true}, ref: MediaRef{URI: uri}, limit: 5,
		wantErr:   ErrMediaTooLarge,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file"},
	}, {
		name: "encrypted", srv: &mediaServer{data: cipher}, ref: MediaRef{URI: uri, File: &wire.EncryptedFile}, limit: 100, want: plain,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file"},
	}, {
		name: "encrypted and tampered with", srv: &mediaServer{data: tampered}, ref: MediaRef{URI: uri, File: &wire.EncryptedFile}, limit: 100,
		wantErr:   attachment.ErrHashMismatch,
		wantPaths: []string{"/_matrix/client/v1/media/download/example.org/file"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(tt.srv)
			defer hs.Close()
			a := newTestAccount(t, hs.URL)
			got, err := a.Download(t.Context(), tt.ref, tt.limit)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Download error = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Download: %v", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Download = %q, want %q", got, tt.want)
			}
			tt.srv.mu.Lock()
			defer tt.srv.mu.Unlock()
			if strings.Join(tt.srv.paths, " ") != strings.Join(tt.wantPaths, " ") {
				t.Errorf("requests %v, want %v", tt.srv.paths, tt.wantPaths)
			}
			for _, auth := range tt.srv.auth {
				if !strings.HasPrefix(auth, "Bearer ") {
					t.Errorf("a download went without the access token: %q", auth)
				}
			}
		})
	}
}

// The round trip of an encrypted attachment: what a sender encrypts with
// mautrix, DecryptMedia restores from the key material of the event alone,
// and a wrong hash is refused.
func TestDecryptMediaRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		plain []byte
	}{
		{"empty", nil},
		{"short", []byte("x")},
		{"png header", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")},
		{"larger than a block", bytes.Repeat([]byte("0123456789abcdef"), 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := attachment.NewEncryptedFile()
			data := bytes.Clone(tt.plain)
			enc.EncryptInPlace(data)
			if len(tt.plain) > 16 && bytes.Equal(data, tt.plain) {
				t.Fatal("EncryptInPlace did not encrypt")
			}
			content := mustJSON(t, map[string]any{"msgtype": "m.image", "body": "a.png",
				"file": event.EncryptedFileInfo{EncryptedFile: *enc, URL: "mxc://example.org/abc"}})
			var msg event.MessageEventContent
			if err := json.Unmarshal(content, &msg); err != nil {
				t.Fatal(err)
			}
			ref, ok := MediaRefOf(&msg)
			if !ok || ref.File == nil || ref.URI.String() != "mxc://example.org/abc" {
				t.Fatalf("MediaRefOf = %+v, %v", ref, ok)
			}
			received := bytes.Clone(data)
			if err := DecryptMedia(ref.File, received); err != nil {
				t.Fatalf("DecryptMedia: %v", err)
			}
			if !bytes.Equal(received, tt.plain) {
				t.Errorf("decrypted %q, want %q", received, tt.plain)
			}
			// The same ref decrypts again (nothing is consumed or cached wrongly).
			again := bytes.Clone(data)
			if err := DecryptMedia(ref.File, again); err != nil || !bytes.Equal(again, tt.plain) {
				t.Errorf("second DecryptMedia = %q, %v", again, err)
			}
			wrong := *ref.File
			wrong.Hashes.SHA256 = enc.Hashes.SHA256[:len(enc.Hashes.SHA256)-2] + "AA"
			if err := DecryptMedia(&wrong, bytes.Clone(data)); !errors.Is(err, attachment.ErrHashMismatch) {
				t.Errorf("DecryptMedia with a wrong hash = %v, want ErrHashMismatch", err)
			}
		})
	}
}

func TestMediaRefOf(t *testing.T) {
	enc := attachment.NewEncryptedFile()
	tests := []struct {
		name    string
		msg     event.MessageEventContent
		wantURI string
		wantEnc bool
		wantOK  bool
	}{
		{name: "plain url", msg: event.MessageEventContent{URL: "mxc://example.org/a"}, wantURI: "mxc://example.org/a", wantOK: true},
		{name: "encrypted file", msg: event.MessageEventContent{File: &event.EncryptedFileInfo{EncryptedFile: *enc, URL: "mxc://example.org/b"}}, wantURI: "mxc://example.org/b", wantEnc: true, wantOK: true},
		{name: "no file", msg: event.MessageEventContent{Body: "a.png"}},
		{name: "not an mxc uri", msg: event.MessageEventContent{URL: "https://example.org/a.png"}},
		{name: "file without url", msg: event.MessageEventContent{File: &event.EncryptedFileInfo{EncryptedFile: *enc}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, ok := MediaRefOf(&tt.msg)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if ref.URI.String() != tt.wantURI || (ref.File != nil) != tt.wantEnc {
				t.Errorf("ref = %+v", ref)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
