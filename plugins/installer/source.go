package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hookroom/hookroom/hooks"
)

// source is where a plugin comes from.
type source struct {
	typ hooks.PluginSourceType
	// location is what is fetched: an absolute path, or the git URL with
	// its credentials.
	location string
	// display is what is shown and written to the lock file: the path, or
	// the URL without its password.
	display string
	// ref is the git ref asked for ("" for the default branch).
	ref string
}

func (s source) String() string {
	if s.ref != "" {
		return s.display + "#" + s.ref
	}
	return s.display
}

var (
	scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)
	fullSHA = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
)

// parseSource classifies what the operator named (see the package
// documentation). Relative paths are made absolute.
func parseSource(s string) (source, error) {
	if strings.TrimSpace(s) == "" {
		return source{}, errors.New("no source given: name a plugin directory, a .tar.gz archive or a git URL")
	}
	lower := strings.ToLower(s)
	git := strings.HasPrefix(lower, "git+")
	if git {
		s = s[len("git+"):]
	}
	for _, scheme := range []string{"https://", "http://", "ssh://", "git://", "file://"} {
		git = git || strings.HasPrefix(lower, scheme)
	}
	git = git || scpLike.MatchString(s)
	if git {
		loc, ref, _ := strings.Cut(s, "#")
		if loc == "" {
			return source{}, fmt.Errorf("%s: no repository in the git source", s)
		}
		if strings.HasPrefix(loc, "-") {
			return source{}, fmt.Errorf("%s: not a git URL", loc)
		}
		if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n") {
			return source{}, fmt.Errorf("%s: invalid git ref %q", loc, ref)
		}
		if !strings.Contains(loc, "://") && !scpLike.MatchString(loc) {
			abs, err := filepath.Abs(loc) // git+/path or git+relative/path
			if err != nil {
				return source{}, err
			}
			loc = abs
		}
		return source{typ: hooks.PluginSourceGit, location: loc, display: redactURL(loc), ref: ref}, nil
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return source{}, err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return source{}, fmt.Errorf("%s does not exist (name a plugin directory, a .tar.gz archive or a git URL)", abs)
	case err != nil:
		return source{}, err
	case st.IsDir():
		return source{typ: hooks.PluginSourceDir, location: abs, display: abs}, nil
	case strings.HasSuffix(lower, ".tar.gz") || strings.HasSuffix(lower, ".tgz"):
		return source{typ: hooks.PluginSourceTarball, location: abs, display: abs}, nil
	}
	return source{}, fmt.Errorf("%s is neither a directory nor a .tar.gz archive (a git repository needs a URL, or git+PATH)", abs)
}

// redactURL removes the password of a URL's user information.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); !has {
		return s
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

// fetch puts the plugin of src into dst (which must not exist) and
// returns the commit for git sources.
func (i *Installer) fetch(ctx context.Context, src source, dst string) (commit string, err error) {
	lim := i.limits()
	switch src.typ {
	case hooks.PluginSourceDir:
		return "", copyTree(ctx, src.location, dst, lim)
	case hooks.PluginSourceTarball:
		return "", extractTarGz(ctx, src.location, dst, lim)
	case hooks.PluginSourceGit:
		return i.clone(ctx, src, dst)
	}
	return "", fmt.Errorf("unknown source type %q", src.typ)
}

// clone makes a shallow clone of src into dst, checks out src.ref and
// removes the .git directory; it returns the commit checked out.
func (i *Installer) clone(ctx context.Context, src source, dst string) (string, error) {
	if fullSHA.MatchString(src.ref) {
		// A commit: --branch takes only branches and tags.
		if _, err := i.git(ctx, src, "", "init", "--quiet", dst); err != nil {
			return "", err
		}
		if _, err := i.git(ctx, src, dst, "fetch", "--quiet", "--depth", "1", "--", src.location, src.ref); err != nil {
			return "", err
		}
		if _, err := i.git(ctx, src, dst, "checkout", "--quiet", "--detach", "FETCH_HEAD"); err != nil {
			return "", err
		}
	} else {
		args := []string{"clone", "--quiet", "--depth", "1", "--no-tags"}
		if src.ref != "" {
			args = append(args, "--branch", src.ref)
		}
		if _, err := i.git(ctx, src, "", append(args, "--", src.location, dst)...); err != nil {
			return "", err
		}
	}
	out, err := i.git(ctx, src, dst, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(out)
	if err := os.RemoveAll(filepath.Join(dst, ".git")); err != nil {
		return "", err
	}
	return commit, nil
}

// git runs one git command (in dir, unless "") under the git timeout,
// without prompts, and returns its output; errors carry git's message with
// src's credentials removed.
func (i *Installer) git(ctx context.Context, src source, dir string, args ...string) (string, error) {
	timeout := orDefault(i.opts.GitTimeout, DefaultGitTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, orDefault(i.opts.Git, "git"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GCM_INTERACTIVE=never")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	msg := strings.TrimSpace(stderr.String())
	if src.location != src.display {
		msg = strings.ReplaceAll(msg, src.location, src.display)
		if u, perr := url.Parse(src.location); perr == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				msg = strings.ReplaceAll(msg, pw, "***")
			}
		}
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("git %s timed out after %s", args[0], timeout)
	}
	if msg = gitMessage(msg); msg == "" {
		msg = err.Error()
	}
	return "", fmt.Errorf("git %s failed: %s", args[0], msg)
}

// gitMessage keeps git's "fatal:" and "error:" lines (all non-empty lines
// when there are none), joined into one line.
func gitMessage(stderr string) string {
	var all, errs []string
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		all = append(all, line)
		if strings.HasPrefix(line, "fatal:") || strings.HasPrefix(line, "error:") {
			errs = append(errs, line)
		}
	}
	if len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return strings.Join(all, "; ")
}
