package bot

import (
	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
)

// What the command line (cmd/hookroom) needs besides New, Run and the
// inspection methods: checks and error reporting that follow the
// configuration's file:line conventions.

// CheckAccounts reads every configured avatar file, as start-up and reload
// will, and reports the problems, each naming its file:line (hookroom
// check, hookroom init).
func CheckAccounts(cfg *config.Config) error { return checkAccounts(cfg) }

// SplitErrors returns one error per configuration problem in err: when err
// holds a config.ErrorList of several problems, each is returned wrapped in
// what err says around the list; otherwise err alone. The command line
// prints one line for each.
func SplitErrors(err error) []error { return splitErrors(err) }

// LogStartFailure logs err, what New returned to hookroom run, at error
// level as "failed to start", one line per configuration problem (with
// problem=N/M when there are several).
func LogStartFailure(log *zerolog.Logger, err error) {
	logErrors(log, zerolog.ErrorLevel, err, "failed to start")
}
