package prefs_test

import "maunium.net/go/mautrix/id"

func idOf(s string) id.EventID { return id.EventID(s) }
