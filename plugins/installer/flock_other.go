//go:build !unix

package installer

import "os"

// tryLock is a no-op where flock(2) does not exist: the O_EXCL lock of a
// second file would outlive a crash. Operations then do not exclude each
// other.
func tryLock(*os.File) (busy bool, err error) { return false, nil }

func unlock(*os.File) error { return nil }
