// Command hookroom runs the hookroom Matrix agent server. See README.md.
package main

import (
	"os"

	"github.com/hookroom/hookroom/bot"
)

func main() {
	os.Exit(bot.Main(os.Args[1:], os.Stdout, os.Stderr))
}
