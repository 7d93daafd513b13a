// Command go-redact is the redact plugin (package redact) as a process
// plugin. Build it next to its manifest:
//
//	go build -o examples/go-redact/go-redact ./examples/go-redact
//
// and enable the directory in config.yaml:
//
//	plugins:
//	  - path: ./examples/go-redact
//	    settings:
//	      patterns: ['internal-[0-9]{6}']   # added to the built-in patterns
//	      replacement: '[redacted]'
//
// The same code can be compiled into hookroom instead:
// plugins.RegisterBuiltin(redact.Plugin.Builtin()).
package main

import (
	"github.com/hookroom/hookroom/examples/go-redact/redact"
	"github.com/hookroom/hookroom/plugins/sdk"
)

func main() { sdk.Main(redact.Plugin) }
