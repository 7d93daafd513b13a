package config

import "time"

// DefaultPluginDir is where hookroom plugin install puts plugins when
// plugin_install.dir is not set, relative to the config directory.
const DefaultPluginDir = "./plugins"

// PluginInstall configures `hookroom plugin install|update|remove|list`:
// the plugin directory they manage and the limits of an install. A running
// server does not read it (it loads the plugins the plugins list names).
// The keys mirror plugins/installer.Options, which the command line builds
// from them; a zero value means that package's default.
type PluginInstall struct {
	// Dir is the plugin directory: plugins are installed into Dir/<name>,
	// with the lock file Dir/hookroom-plugins.lock. Default ./plugins; a
	// relative path is resolved against the config directory.
	Dir string `yaml:"dir"`
	// GitTimeout bounds each git command of an install from a git
	// repository (default 2m).
	GitTimeout Duration `yaml:"git_timeout"`
	// MaxSize bounds the bytes of file content of one plugin, as unpacked
	// (default 256MiB).
	MaxSize ByteSize `yaml:"max_size"`
	// MaxFiles bounds the entries (files, directories, links) of one
	// plugin (default 10000).
	MaxFiles int `yaml:"max_files"`
	// LockWait is how long a command waits for another one working on the
	// plugin directory (default 10s).
	LockWait Duration `yaml:"lock_wait"`
	// Git is the git program (default "git", looked up in PATH).
	Git string `yaml:"git"`
}

// applyPluginInstallDefaults sets plugin_install.dir's default and resolves
// it against the config directory.
func (c *Config) applyPluginInstallDefaults() {
	if c.PluginInstall.Dir == "" {
		c.PluginInstall.Dir = DefaultPluginDir
	}
	c.PluginInstall.Dir = c.ResolvePath(c.PluginInstall.Dir)
}

func (v *validator) pluginInstall() {
	p := v.c.PluginInstall
	if p.Dir == "" {
		v.errorf("plugin_install.dir", "must not be empty")
	}
	for _, d := range []struct {
		key string
		d   Duration
	}{{"plugin_install.git_timeout", p.GitTimeout}, {"plugin_install.lock_wait", p.LockWait}} {
		if d.d < 0 {
			v.errorf(d.key, "must not be negative, not %s (leave the key out for the default)", time.Duration(d.d))
		}
	}
	if p.MaxSize < 0 {
		v.errorf("plugin_install.max_size", "must not be negative, not %d", int64(p.MaxSize))
	}
	if p.MaxFiles < 0 {
		v.errorf("plugin_install.max_files", "must not be negative, not %d", p.MaxFiles)
	}
}
