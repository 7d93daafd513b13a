// Package toolguard is the built-in plugin "tool_guard": config-driven deny
// rules for tool calls. Its one hook, block_tools (tool:before_call, gate,
// priority 10), declines a call that matches a rule, with the rule's reason;
// the model sees the reason instead of the tool's output. Enable it with
//
//	plugins:
//	  - builtin: tool_guard
//	    settings:
//	      blocked_tools: [shell]            # denied for everyone
//	      reason: Ask an operator first.    # default reason (optional)
//	      fail_closed: true                 # a failing guard declines (default false)
//	      rules:
//	        - tool: "fs_*"                  # a tool name or a glob (* ? [a-z]); default "*"
//	          agents: [research]            # only for these agents (optional)
//	          rooms: ["!abc:example.org"]   # only in these rooms, by room id (optional)
//	          requesters: ["@bob:example.org"] # only for these people (optional)
//	          arguments:                    # every listed argument must match (optional)
//	            path: {contains: secret}
//	          reason: Secret files stay unread.
//	        - tool: http_get
//	          arguments:
//	            url: {regex: '^https?://(10|192\.168)\.'}
//	          reason: No requests into the internal network.
//
// # Rules
//
// Rules are checked in order and the first that matches declines the call.
// A rule matches when its tool pattern matches the tool's name and each of
// its agents, rooms, requesters and arguments conditions holds (an absent
// condition always holds). blocked_tools is shorthand for one rule per entry
// with only a tool pattern; those rules come first.
//
// # Argument conditions
//
// The keys of arguments name an argument of the call. "options.path" reaches
// into nested objects; "*" stands for every string, number and boolean
// anywhere in the arguments (the condition holds when any of them matches).
// A condition is a mapping of one or more tests, all of which must hold:
//
//	equals: <any JSON value>   the argument equals it (a scalar shorthand: path: "/etc/shadow")
//	contains: <text>           the argument's text contains it
//	prefix: <text>, suffix: <text>
//	glob: <pattern>            the whole text matches the glob (* ? [a-z]; * does not cross /)
//	regex: <RE2>               the text matches the regular expression (unanchored)
//	exists: true|false         the argument is present / absent
//	ignore_case: true          makes equals, contains, prefix, suffix and glob case-insensitive
//
// The text of a string argument is the string; of any other value its
// compact JSON. For a list argument the tests are applied to each element
// and to the list as a whole, and the condition holds when any of them
// matches. A call whose arguments
// are not a JSON object matches no rule with argument conditions.
//
// # Failures
//
// Invalid settings (an unknown key, a bad glob or regular expression, a room
// that is not a room id, a rule that has nothing to match) are load errors
// naming the rule's index and the file:line of config.yaml. The guard itself
// cannot fail in normal operation; with fail_closed: true (or a hook
// override failure_policy: closed) a guard that fails anyway, or passes its
// 200 ms deadline, declines the call instead of letting it through.
package toolguard
