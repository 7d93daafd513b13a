package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnsupported is returned by Start when the kernel (or the operating
// system) offers no Landlock.
var ErrUnsupported = errors.New("landlock is not supported by this kernel")

// Policy is what a confined program may reach. Paths must be absolute; a
// path that does not exist is skipped (system directories differ between
// distributions). A directory grants access to everything beneath it.
type Policy struct {
	// ReadOnly are paths the program may read and execute.
	ReadOnly []string
	// ReadWrite are paths the program may also create, write, rename and
	// remove files in.
	ReadWrite []string
	// Devices are device nodes (or directories of them) the program may
	// read, write and send ioctls to, without creating anything there.
	// Symbolic links among them are skipped, not followed: those of /dev
	// (/dev/fd, /dev/stdin, …) lead into /proc/self, which resolved by the
	// server would be the server's own.
	Devices []string
}

// systemDevices are the device nodes ForProgram grants: the ones programs
// and interpreters open themselves. Not /dev as a whole: /dev/shm beneath it
// is a tmpfs that may hold hookroom's data_dir (its database and WAL, with
// the access tokens) or PostgreSQL's shared memory, and /dev has disks and
// consoles. /dev/stdin, /dev/stdout, /dev/stderr and /dev/fd/N need no rule:
// they are symbolic links to a program's own open files, which it keeps
// whatever they are.
var systemDevices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
}

// systemReadOnly are the directories a dynamically linked program and the
// usual interpreters (python3, node, sh) need to start and run: binaries,
// libraries, /sys, and the few files of /etc that
// name resolution, TLS and locales read. /etc as a whole is not granted:
// operators keep configuration and secrets there. Neither is /proc:
// Landlock's path rules cannot tell a program's own /proc/<pid> from the
// server's, and /proc/<server pid>/environ holds the server's secrets
// (PR_SET_DUMPABLE keeps other users out, not root).
var systemReadOnly = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/nix/store",
	"/sys",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
	"/etc/zoneinfo", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/resolv.conf", "/etc/hosts",
	"/etc/host.conf", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/passwd", "/etc/group", "/etc/mime.types", "/etc/alternatives", "/etc/os-release",
	"/etc/python3", "/etc/environment",
}

// ForProgram returns the policy for a plugin program: the system
// directories read-only, its directory dir read-only, the installation the
// program executable belongs to read-only (see ProgramRoots), stateDir
// read-write, and the device nodes /dev/null, /dev/zero, /dev/full,
// /dev/random, /dev/urandom and /dev/tty (nothing else of /dev, /dev/shm
// included). extraRO and extraRW are the operator's additions. Relative or
// empty entries are ignored by Start's validation; callers resolve them
// first.
func ForProgram(program, dir, stateDir string, extraRO, extraRW []string) Policy {
	p := Policy{Devices: slices.Clone(systemDevices)}
	p.ReadOnly = append(p.ReadOnly, systemReadOnly...)
	if dir != "" {
		p.ReadOnly = append(p.ReadOnly, dir)
	}
	p.ReadOnly = append(p.ReadOnly, ProgramRoots(program)...)
	p.ReadOnly = append(p.ReadOnly, extraRO...)
	if stateDir != "" {
		p.ReadWrite = append(p.ReadWrite, stateDir)
	}
	p.ReadWrite = append(p.ReadWrite, extraRW...)
	p.ReadOnly = dedup(p.ReadOnly)
	p.ReadWrite = dedup(p.ReadWrite)
	return p
}

// binDirs are directory names that hold an installation's executables;
// the installation is their parent (/opt/node/bin/node → /opt/node,
// ~/.pyenv/shims/python3 → ~/.pyenv).
var binDirs = []string{"bin", "sbin", "shims"}

// ProgramRoots returns what a program needs of its own installation: for an
// executable in a bin, sbin or shims directory the installation around it
// (its parent), otherwise the executable's directory; both for the path as
// given and for the file it links to. Roots of "/" or of a home directory
// itself are never returned: the program file alone is.
func ProgramRoots(program string) []string {
	if !filepath.IsAbs(program) {
		return nil
	}
	var roots []string
	add := func(p string) {
		dir := filepath.Dir(p)
		root := dir
		if slices.Contains(binDirs, filepath.Base(dir)) {
			root = filepath.Dir(dir)
		}
		if tooBroad(root) {
			root = p
		}
		roots = append(roots, root)
	}
	add(program)
	if real, err := filepath.EvalSymlinks(program); err == nil && real != program {
		add(real)
	}
	return dedup(roots)
}

// tooBroad says whether granting dir would grant far more than one
// installation: the root, the top-level directories, home directories and
// the temporary directory itself.
func tooBroad(dir string) bool {
	dir = filepath.Clean(dir)
	if dir == "/" || strings.Count(dir, "/") < 2 {
		return true
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.Clean(home) == dir {
		return true
	}
	parent := filepath.Dir(dir)
	return parent == "/home" || dir == filepath.Clean(os.TempDir())
}

func dedup(paths []string) []string {
	out := paths[:0:0]
	for _, p := range paths {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
