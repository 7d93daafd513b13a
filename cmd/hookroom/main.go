// Command hookroom runs the hookroom Matrix agent server.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "hookroom: not yet runnable")
	os.Exit(2)
}
