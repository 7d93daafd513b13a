//go:build !unix

package sdk

import "os"

func stdin() *os.File { return os.Stdin }
