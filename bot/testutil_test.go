package bot

import (
	"context"
	"errors"

	"github.com/hookroom/hookroom/config"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func loadConfigWithSecret(ctx context.Context, path, secret string) (*config.Config, error) {
	return config.Load(ctx, path, config.WithLookupEnv(func(k string) (string, bool) {
		if k == "HS_SECRET" {
			return secret, true
		}
		return "", false
	}))
}
