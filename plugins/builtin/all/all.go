// Package all enables every built-in plugin that ships with hookroom. The
// server imports it for its side effects:
//
//	import _ "github.com/hookroom/hookroom/plugins/builtin/all"
//
// A custom build that wants fewer or more built-ins imports those packages
// instead (each registers itself with plugins.RegisterBuiltin from init).
package all

import (
	_ "github.com/hookroom/hookroom/plugins/builtin/auditlog"    // audit_log
	_ "github.com/hookroom/hookroom/plugins/builtin/contextinfo" // context_info
	_ "github.com/hookroom/hookroom/plugins/builtin/knowledge"   // knowledge
	_ "github.com/hookroom/hookroom/plugins/builtin/memory"      // memory
	_ "github.com/hookroom/hookroom/plugins/builtin/toolguard"   // tool_guard
)
