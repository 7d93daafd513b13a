package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Access rights by the Landlock ABI version that introduced them.
const (
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRefer    = unix.LANDLOCK_ACCESS_FS_REFER     // ABI 2
	fsTruncate = unix.LANDLOCK_ACCESS_FS_TRUNCATE  // ABI 3
	fsIoctlDev = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV // ABI 5

	// The rights that make sense on a file (not a directory) rule.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | fsTruncate | fsIoctlDev

	readOnlyRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR
	deviceRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | fsTruncate | fsIoctlDev
)

var abi = sync.OnceValue(func() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
})

// Available reports the kernel's Landlock ABI version, 0 when Landlock is
// missing or disabled.
func Available() int { return abi() }

// handledRights are the file-system rights the running kernel knows; a
// ruleset handles all of them, so whatever a rule does not grant is denied.
func handledRights(v int) uint64 {
	r := uint64(fsRightsV1)
	if v >= 2 {
		r |= fsRefer
	}
	if v >= 3 {
		r |= fsTruncate
	}
	if v >= 5 {
		r |= fsIoctlDev
	}
	return r
}

// Start starts cmd confined by p. It returns ErrUnsupported (wrapped)
// without starting anything when the kernel has no Landlock, and an error
// naming the path when a rule cannot be added. The server's own threads are
// never confined.
func (p Policy) Start(cmd *exec.Cmd) error {
	v := abi()
	if v == 0 {
		return fmt.Errorf("failed to confine %s: %w", cmd.Path, ErrUnsupported)
	}
	if err := p.validate(); err != nil {
		return err
	}
	return p.startConfined(cmd, v)
}

// startConfined confines a thread of its own and starts cmd from it. The
// thread stays locked: when the goroutine returns the runtime discards it,
// so the restriction never reaches other goroutines. The process's main
// thread is never used: the runtime cannot discard it (it would keep the
// restriction, and /proc/<pid>/… of the server would then be open to every
// program confined in that domain).
func (p Policy) startConfined(cmd *exec.Cmd, v int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Hold the main thread while another goroutine, which
			// therefore runs elsewhere, does the work.
			errc <- p.startConfined(cmd, v)
			runtime.UnlockOSThread()
			return
		}
		if err := p.restrictThread(v); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

func (p Policy) validate() error {
	for _, list := range [][]string{p.ReadOnly, p.ReadWrite, p.Devices} {
		for _, path := range list {
			if !filepath.IsAbs(path) {
				return fmt.Errorf("failed to confine the program: sandbox path %q is not absolute", path)
			}
		}
	}
	return nil
}

// restrictThread confines the calling thread (which must be locked).
func (p Policy) restrictThread(v int) error {
	handled := handledRights(v)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	size := unsafe.Sizeof(attr)
	if v < 4 {
		size = unsafe.Offsetof(attr.Access_net)
	} else if v < 6 {
		size = unsafe.Offsetof(attr.Scoped)
	} else {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("failed to create a landlock ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)

	for _, r := range []struct {
		paths  []string
		rights uint64
		flags  int
	}{
		{p.ReadOnly, readOnlyRights, 0},
		{p.ReadWrite, handled, 0},
		{p.Devices, deviceRights & handled, unix.O_NOFOLLOW},
	} {
		for _, path := range r.paths {
			if err := addPathRule(ruleset, path, r.rights&handled, r.flags); err != nil {
				return err
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("failed to set no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("failed to enforce the landlock ruleset: %w", errno)
	}
	return nil
}

// addPathRule grants rights beneath path; a missing path is skipped, and so
// is a symbolic link opened with O_NOFOLLOW in flags.
func addPathRule(ruleset int, path string, rights uint64, flags int) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EACCES) {
			return nil
		}
		return fmt.Errorf("failed to open sandbox path %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("failed to stat sandbox path %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil
	default:
		rights &= fileRights
	}
	if rights == 0 {
		return nil
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("failed to allow sandbox path %s: %w", path, errno)
	}
	return nil
}
