package bot

import (
	"context"

	"github.com/hookroom/hookroom/config"
)

func loadConfigWithSecret(ctx context.Context, path, secret string) (*config.Config, error) {
	return config.Load(ctx, path, config.WithLookupEnv(func(k string) (string, bool) {
		if k == "HS_SECRET" {
			return secret, true
		}
		return "", false
	}))
}
