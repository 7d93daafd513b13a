package main

import (
	"os"

	_ "github.com/hookroom/hookroom/plugins/builtin/all" // the built-in plugins
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
