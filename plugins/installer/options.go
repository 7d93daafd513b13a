package installer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookroom/hookroom/hooks"
)

// Gate decides whether a staged plugin may be installed; the bot backs it
// with the plugin:before_install hooks. It is called once per install or
// update, after validation and before anything in the plugin directory
// changes, with the context filled in (Declined unset). allow false refuses
// the install with reason; an error refuses it too (the gate fails closed).
type Gate func(ctx context.Context, c hooks.PluginInstallContext) (allow bool, reason string, err error)

// Defaults of Options.
const (
	DefaultGitTimeout = 2 * time.Minute
	DefaultMaxSize    = 256 << 20 // bytes of file content
	DefaultMaxFiles   = 10000
	DefaultLockWait   = 10 * time.Second
)

// Options configure an Installer. Only Dir is required; the zero value of
// every other field is a sensible default. The yaml tags are the keys the
// configuration may expose; HookroomVersion, Gate and Now are set by code.
type Options struct {
	// Dir is the plugin directory: plugins are installed into Dir/<name>
	// and the lock file is Dir/hookroom-plugins.lock. It is created when
	// missing.
	Dir string `yaml:"dir"`
	// GitTimeout bounds each git command (default 2 min).
	GitTimeout time.Duration `yaml:"git_timeout"`
	// MaxSize bounds the bytes of file content of one plugin, as unpacked
	// (default 256 MiB).
	MaxSize int64 `yaml:"max_size"`
	// MaxFiles bounds the entries (files, directories, links) of one
	// plugin (default 10000).
	MaxFiles int `yaml:"max_files"`
	// LockWait is how long an operation waits for another one holding the
	// plugin directory's lock (default 10 s).
	LockWait time.Duration `yaml:"lock_wait"`
	// Git is the git program (default "git", looked up in PATH).
	Git string `yaml:"git"`

	// HookroomVersion is the running hookroom's version, checked against
	// a manifest's hookroom range. A value that is not a version ("dev",
	// "") skips the check with a warning.
	HookroomVersion string `yaml:"-"`
	// Gate is asked before every install and update; nil allows all.
	Gate Gate `yaml:"-"`
	// Now is the clock of installed_at (default time.Now).
	Now func() time.Time `yaml:"-"`
}

// Validate reports every problem of o at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("dir: the plugin directory is required"))
	}
	if o.GitTimeout < 0 {
		errs = append(errs, fmt.Errorf("git_timeout: must not be negative, not %s", o.GitTimeout))
	}
	if o.MaxSize < 0 {
		errs = append(errs, fmt.Errorf("max_size: must not be negative, not %d", o.MaxSize))
	}
	if o.MaxFiles < 0 {
		errs = append(errs, fmt.Errorf("max_files: must not be negative, not %d", o.MaxFiles))
	}
	if o.LockWait < 0 {
		errs = append(errs, fmt.Errorf("lock_wait: must not be negative, not %s", o.LockWait))
	}
	return errors.Join(errs...)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
