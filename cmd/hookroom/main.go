package main

import (
	"os"

	"github.com/hookroom/hookroom/bot"
	_ "github.com/hookroom/hookroom/plugins/builtin/all" // the built-in plugins
)

func main() {
	os.Exit(bot.Main(os.Args[1:], os.Stdout, os.Stderr))
}
