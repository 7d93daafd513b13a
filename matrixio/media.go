package matrixio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// ErrMediaTooLarge is wrapped by Download's error when the file is larger
// than the limit it was given.
var ErrMediaTooLarge = errors.New("media is larger than the limit")

// MediaRef points at a file a message carries: its content URI and, for a
// file in an encrypted room, the key and hash to decrypt and check it.
type MediaRef struct {
	URI id.ContentURI
	// File is nil for unencrypted media.
	File *attachment.EncryptedFile
}

// MediaRefOf returns the file msg carries: msg.File in an encrypted room
// (the decrypted event carries the file's key there instead of a url),
// msg.URL otherwise. ok is false when the message carries no valid
// content URI.
func MediaRefOf(msg *event.MessageEventContent) (ref MediaRef, ok bool) {
	if msg.File != nil && msg.File.URL != "" {
		uri, err := msg.File.URL.Parse()
		if err != nil || uri.IsEmpty() {
			return MediaRef{}, false
		}
		ef := msg.File.EncryptedFile
		return MediaRef{URI: uri, File: &ef}, true
	}
	if msg.URL == "" {
		return MediaRef{}, false
	}
	uri, err := msg.URL.Parse()
	if err != nil || uri.IsEmpty() {
		return MediaRef{}, false
	}
	return MediaRef{URI: uri}, true
}

// Download fetches the file ref points at, decrypted and checked against
// its hash when it is encrypted. It reads at most limit bytes: a larger
// file fails with ErrMediaTooLarge, without reading the rest. It is called
// while a turn prepares its prompt and when a plugin fetches an
// attachment.
//
// It uses the authenticated media API (GET /_matrix/client/v1/media/download,
// Matrix 1.11, which Dendrite 0.15 and Synapse serve). Only a server that
// does not know that endpoint (404 M_UNRECOGNIZED, or a bare 404/405) is
// asked again on the legacy, unauthenticated /_matrix/media/v3/download,
// which servers of Matrix 1.10 and earlier have instead.
func (a *Account) Download(ctx context.Context, ref MediaRef, limit int64) ([]byte, error) {
	if ref.URI.IsEmpty() {
		return nil, fmt.Errorf("failed to download media: %w", mautrix.MNotFound)
	}
	var data []byte
	err := a.do(ctx, "download media", retryTransient, func(ctx context.Context) error {
		resp, err := a.cli().Download(ctx, ref.URI)
		if err != nil && lacksEndpoint(err) {
			resp, err = a.legacyDownload(ctx, ref.URI)
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.ContentLength > limit {
			return fmt.Errorf("%w (%d bytes, limit %d)", ErrMediaTooLarge, resp.ContentLength, limit)
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return fmt.Errorf("failed to read the body: %w", err)
		}
		if int64(len(data)) > limit {
			return fmt.Errorf("%w (limit %d bytes)", ErrMediaTooLarge, limit)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to download %s: %w", ref.URI, err)
	}
	if ref.File != nil {
		if err := DecryptMedia(ref.File, data); err != nil {
			return nil, fmt.Errorf("failed to decrypt %s: %w", ref.URI, err)
		}
	}
	return data, nil
}

// DecryptMedia decrypts data, an encrypted attachment as downloaded, in
// place after checking it against the SHA-256 hash of file (a mismatch is
// attachment.ErrHashMismatch). file is not modified.
func DecryptMedia(file *attachment.EncryptedFile, data []byte) error {
	ef := *file // DecryptInPlace caches the decoded key on its receiver
	return ef.DecryptInPlace(data)
}

// lacksEndpoint reports whether err says that the server does not know the
// request's endpoint at all (as opposed to not knowing the media).
func lacksEndpoint(err error) bool {
	if errors.Is(err, mautrix.MUnrecognized) {
		return true
	}
	var httpErr mautrix.HTTPError
	if !errors.As(err, &httpErr) || httpErr.Response == nil {
		return false
	}
	status := httpErr.Response.StatusCode
	return (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) &&
		(httpErr.RespError == nil || httpErr.RespError.ErrCode == "")
}

// legacyDownload is GET /_matrix/media/v3/download, for servers without
// the authenticated media API. The access token goes along as it does on
// every request of the client; servers ignore it there.
func (a *Account) legacyDownload(ctx context.Context, uri id.ContentURI) (*http.Response, error) {
	cli := a.cli()
	_, resp, err := cli.MakeFullRequestWithResp(ctx, mautrix.FullRequest{
		Method:           http.MethodGet,
		URL:              cli.BuildURL(mautrix.MediaURLPath{"v3", "download", uri.Homeserver, uri.FileID}),
		DontReadResponse: true,
	})
	return resp, err
}
