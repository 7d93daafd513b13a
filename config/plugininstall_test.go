package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
)

func TestPluginInstall(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want config.PluginInstall
	}{
		{"default: ./plugins next to config.yaml", "",
			config.PluginInstall{Dir: "/cfg/plugins"}},
		{"relative dir, limits",
			"plugin_install:\n  dir: ../shared/plugins\n  git_timeout: 30s\n  max_size: 10MiB\n  max_files: 500\n  lock_wait: 1m\n  git: /usr/local/bin/git\n",
			config.PluginInstall{Dir: "/shared/plugins", GitTimeout: config.Duration(30 * time.Second), MaxSize: 10 * config.MiB,
				MaxFiles: 500, LockWait: config.Duration(time.Minute), Git: "/usr/local/bin/git"}},
		{"absolute dir", "plugin_install:\n  dir: /srv/hookroom/plugins/\n",
			config.PluginInstall{Dir: "/srv/hookroom/plugins"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParseAt(t, minimal+tt.yaml)
			if c.PluginInstall != tt.want {
				t.Errorf("plugin_install = %+v, want %+v", c.PluginInstall, tt.want)
			}
			before := c.PluginInstall
			c.ApplyDefaults()
			if c.PluginInstall != before {
				t.Errorf("a second ApplyDefaults changed plugin_install to %+v", c.PluginInstall)
			}
		})
	}
}

func TestPluginInstallInvalid(t *testing.T) {
	src := minimal + "plugin_install:\n  git_timeout: -1s\n  max_size: -5\n  max_files: -1\n  lock_wait: -2s\n  colour: blue\n"
	_, err := config.Parse([]byte(src), "config.yaml", fakeEnv(nil))
	if err == nil {
		t.Fatal("negative plugin_install limits were accepted")
	}
	for _, want := range []string{
		"config.yaml:4: plugin_install.git_timeout: must not be negative, not -1s",
		"config.yaml:5: plugin_install.max_size: expected a size",
		"config.yaml:6: plugin_install.max_files: must not be negative, not -1",
		"config.yaml:7: plugin_install.lock_wait: must not be negative, not -2s",
		"config.yaml:8: plugin_install.colour: unknown key (known keys: dir, git, git_timeout, lock_wait, max_files, max_size)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}
