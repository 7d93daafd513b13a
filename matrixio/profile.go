package matrixio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Profile is what an account shows people: its display name and avatar.
type Profile struct {
	// DisplayName is set when it differs; empty leaves it alone.
	DisplayName string
	// Avatar is set when it differs; the zero value leaves it alone.
	Avatar Avatar
}

// Avatar is a profile picture: an mxc:// URI to use as it is, or an image
// to upload. An image is uploaded once: its SHA-256 and the URI it got are
// remembered in the account's data on the homeserver (survives a lost
// database), so restarts and reloads upload it again only when it changed.
type Avatar struct {
	// URI is an mxc:// URI already on a homeserver.
	URI id.ContentURI
	// Data is an image file's content, uploaded when URI is empty.
	Data []byte
	// ContentType is Data's MIME type ("image/png").
	ContentType string
	// FileName is Data's file name, given to the media repository.
	FileName string
}

// IsZero reports whether a is the zero value (leave the avatar alone).
func (a Avatar) IsZero() bool { return a.URI.IsEmpty() && len(a.Data) == 0 }

// avatarAccountData is the account data event that remembers the uploaded
// avatar: the SHA-256 of the image and the URI it was uploaded to.
var avatarAccountData = event.Type{Type: "org.hookroom.avatar", Class: event.AccountDataEventType}

type avatarRecord struct {
	SHA256 string `json:"sha256"`
	URI    string `json:"uri"`
}

// SetProfile makes the account's display name and avatar what p says,
// changing only what differs. EnsureAccount calls it with the spec's
// profile; call it again when the configuration changes.
func (a *Account) SetProfile(ctx context.Context, p Profile) error {
	ctx = zerolog.Ctx(ctx).With().Stringer("user_id", a.userID).Logger().WithContext(ctx)
	return a.setProfile(ctx, p)
}

// setProfile is SetProfile with a logger that names the account already.
func (a *Account) setProfile(ctx context.Context, p Profile) error {
	if err := a.ensureDisplayName(ctx, p.DisplayName); err != nil {
		return err
	}
	if p.Avatar.IsZero() {
		return nil
	}
	return a.ensureAvatar(ctx, p.Avatar)
}

// ensureDisplayName sets the profile display name if name is not empty and
// differs from the current one.
func (a *Account) ensureDisplayName(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	var current string
	err := a.do(ctx, "get display name", retryTransient, func(ctx context.Context) error {
		resp, err := a.cli().GetOwnDisplayName(ctx)
		if errors.Is(err, mautrix.MNotFound) {
			current = ""
			return nil
		} else if err != nil {
			return err
		}
		current = resp.DisplayName
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to get display name of %s: %w", a.userID, err)
	}
	if current == name {
		return nil
	}
	err = a.do(ctx, "set display name", retryTransient, func(ctx context.Context) error {
		return a.cli().SetDisplayName(ctx, name)
	})
	if err != nil {
		return fmt.Errorf("failed to set display name of %s: %w", a.userID, err)
	}
	zerolog.Ctx(ctx).Info().Msg("Set display name")
	return nil
}

// ensureAvatar sets the profile picture to av, uploading av.Data unless the
// account data says it was uploaded already.
func (a *Account) ensureAvatar(ctx context.Context, av Avatar) error {
	target := av.URI
	if target.IsEmpty() {
		uri, err := a.uploadAvatar(ctx, av)
		if err != nil {
			return err
		}
		target = uri
	}
	var current id.ContentURI
	err := a.do(ctx, "get avatar", retryTransient, func(ctx context.Context) (err error) {
		current, err = a.cli().GetOwnAvatarURL(ctx)
		if errors.Is(err, mautrix.MNotFound) {
			current, err = id.ContentURI{}, nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to get avatar of %s: %w", a.userID, err)
	}
	if current == target {
		return nil
	}
	err = a.do(ctx, "set avatar", retryTransient, func(ctx context.Context) error {
		return a.cli().SetAvatarURL(ctx, target)
	})
	if err != nil {
		return fmt.Errorf("failed to set avatar of %s: %w", a.userID, err)
	}
	zerolog.Ctx(ctx).Info().Stringer("avatar", target).Msg("Set avatar")
	return nil
}

// uploadAvatar returns the URI of av.Data: the remembered one if the same
// image was uploaded before, else a new upload (remembered).
func (a *Account) uploadAvatar(ctx context.Context, av Avatar) (id.ContentURI, error) {
	sum := sha256.Sum256(av.Data)
	hash := hex.EncodeToString(sum[:])
	var rec avatarRecord
	err := a.do(ctx, "get avatar record", retryTransient, func(ctx context.Context) error {
		err := a.cli().GetAccountData(ctx, avatarAccountData.Type, &rec)
		if errors.Is(err, mautrix.MNotFound) {
			rec = avatarRecord{}
			return nil
		}
		return err
	})
	if err != nil {
		return id.ContentURI{}, fmt.Errorf("failed to read the avatar record of %s: %w", a.userID, err)
	}
	if rec.SHA256 == hash {
		if uri, err := id.ParseContentURI(rec.URI); err == nil && !uri.IsEmpty() {
			return uri, nil
		}
	}
	var resp *mautrix.RespMediaUpload
	err = a.do(ctx, "upload avatar", retryTransient, func(ctx context.Context) (err error) {
		resp, err = a.cli().UploadBytesWithName(ctx, av.Data, av.ContentType, av.FileName)
		return err
	})
	if err != nil {
		return id.ContentURI{}, fmt.Errorf("failed to upload the avatar of %s: %w", a.userID, err)
	}
	rec = avatarRecord{SHA256: hash, URI: resp.ContentURI.String()}
	err = a.do(ctx, "save avatar record", retryTransient, func(ctx context.Context) error {
		return a.cli().SetAccountData(ctx, avatarAccountData.Type, &rec)
	})
	if err != nil {
		return id.ContentURI{}, fmt.Errorf("failed to save the avatar record of %s: %w", a.userID, err)
	}
	zerolog.Ctx(ctx).Info().Stringer("avatar", resp.ContentURI).Msg("Uploaded avatar")
	return resp.ContentURI, nil
}

// SetPresence sets the account's presence ("online" while hookroom runs,
// "offline" when it stops). Best effort: homeservers may have presence
// turned off, so a failure is only logged at debug level.
func (a *Account) SetPresence(ctx context.Context, presence event.Presence) {
	err := a.cli().SetPresence(ctx, mautrix.ReqPresence{Presence: presence})
	if err != nil {
		zerolog.Ctx(ctx).Debug().Err(err).Stringer("user_id", a.userID).Str("presence", string(presence)).Msg("Failed to set presence")
	}
}
