package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

// maxAvatarSize bounds an avatar image file; profile pictures are small.
const maxAvatarSize = 4 << 20

// routerSpec is the router's account as cfg configures it.
func routerSpec(cfg *config.Config) (matrixio.AccountSpec, error) {
	r := cfg.Matrix.Router
	return accountSpec(cfg, "matrix.router", r.Username, r.DisplayName, r.Avatar, r.Account)
}

// agentSpec is agent name's account as cfg configures it.
func agentSpec(cfg *config.Config, name string) (matrixio.AccountSpec, error) {
	a := cfg.Agents[name]
	return accountSpec(cfg, "agents."+name, a.Username, a.DisplayName, a.Avatar, a.Account)
}

// accountSpec builds the spec of the account configured at path. An avatar
// file is read here, so a missing or unsuitable file is a configuration
// error with the file:line of the avatar key.
func accountSpec(cfg *config.Config, path, username, displayName, avatar string, acct config.Account) (matrixio.AccountSpec, error) {
	spec := matrixio.AccountSpec{
		Localpart:   username,
		UserID:      acct.UserID,
		DisplayName: displayName,
		AccessToken: acct.AccessToken.Reveal(),
		DeviceID:    acct.DeviceID,
		Password:    acct.Password.Reveal(),
	}
	av, err := avatarOf(cfg, path+".avatar", avatar)
	if err != nil {
		return spec, err
	}
	spec.Avatar = av
	return spec, nil
}

// checkAccounts reads every configured avatar file, as start-up and reload
// will, and reports the problems (hookroom check).
func checkAccounts(cfg *config.Config) error {
	var errs config.ErrorList
	add := func(err error) {
		var e *config.Error
		if errors.As(err, &e) {
			errs = append(errs, e)
		}
	}
	if _, err := routerSpec(cfg); err != nil {
		add(err)
	}
	for _, name := range cfg.AgentNames() {
		if _, err := agentSpec(cfg, name); err != nil {
			add(err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// profileOf is the profile part of spec.
func profileOf(spec matrixio.AccountSpec) matrixio.Profile {
	return matrixio.Profile{DisplayName: spec.DisplayName, Avatar: spec.Avatar}
}

// avatarOf turns an avatar setting into a matrixio.Avatar: an mxc:// URI as
// it is, or the content of an image file.
func avatarOf(cfg *config.Config, path, avatar string) (matrixio.Avatar, error) {
	if avatar == "" {
		return matrixio.Avatar{}, nil
	}
	if config.IsMXC(avatar) {
		uri, err := id.ParseContentURI(avatar)
		if err != nil {
			return matrixio.Avatar{}, cfg.Errorf(path, "%q is not a valid mxc:// URI", avatar)
		}
		return matrixio.Avatar{URI: uri}, nil
	}
	file := cfg.ResolvePath(avatar)
	f, err := os.Open(file)
	if err != nil {
		return matrixio.Avatar{}, cfg.Errorf(path, "failed to read the avatar: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAvatarSize+1))
	if err != nil {
		return matrixio.Avatar{}, cfg.Errorf(path, "failed to read the avatar: %v", err)
	}
	if len(data) > maxAvatarSize {
		return matrixio.Avatar{}, cfg.Errorf(path, "the avatar %s is larger than %s", avatar, config.ByteSize(maxAvatarSize))
	}
	ctype := http.DetectContentType(data)
	if !strings.HasPrefix(ctype, "image/") {
		return matrixio.Avatar{}, cfg.Errorf(path, "%s is not an image (it looks like %s)", avatar, ctype)
	}
	return matrixio.Avatar{Data: data, ContentType: ctype, FileName: filepath.Base(file)}, nil
}

// setPresence sets every account in accounts online or offline (best
// effort; see matrixio.Account.SetPresence).
func setPresence(ctx context.Context, accounts map[id.UserID]entity, presence event.Presence) {
	for _, e := range accounts {
		e.account.SetPresence(ctx, presence)
	}
}

// setRouterProfile applies a changed router display name or avatar.
func (b *Bot) setRouterProfile(ctx context.Context, cfg *config.Config) error {
	spec, err := routerSpec(cfg)
	if err != nil {
		return err
	}
	if err := b.router.SetProfile(ctx, profileOf(spec)); err != nil {
		return fmt.Errorf("failed to update the router's profile: %w", err)
	}
	return nil
}
