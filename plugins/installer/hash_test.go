package installer_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// checksumOf computes the documented checksum of entries {type, path,
// perm, data}, already sorted.
func checksumOf(entries [][4]string) string {
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", e[0], e[1], e[2], e[3])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
