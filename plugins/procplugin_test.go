package plugins_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/sandbox"
)

// pyPlugin is a process plugin written against the protocol with Python's
// standard library only: a gate that declines "shell" and a tool that
// emits a custom event and reports its environment and working directory.
const pyPlugin = `import json, os, sys

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def call(method, params):
    send({"jsonrpc": "2.0", "id": "h1", "method": method, "params": params})
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("id") == "h1" and "method" not in msg:
            return msg

for line in sys.stdin:
    msg = json.loads(line)
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if rid is None:
        continue
    if method == "initialize":
        result = {"api_version": 1, "name": params["plugin"], "version": "0.1",
                  "hooks": [{"event": "tool:before_call", "name": "no_shell", "priority": 5}],
                  "tools": [{"name": "py_echo", "description": "echoes",
                             "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif method == "hook.invoke":
        ctx = params["context"]
        result = {"context": {"declined": True, "decline_reason": "no shell"} if ctx.get("tool") == "shell" else {}}
    elif method == "tool.call":
        call("host.emit", {"invocation": params["invocation"], "event": "py:echoed", "payload": params["arguments"]})
        env = sorted(k for k in os.environ if k not in ("PWD", "SHLVL", "_", "LC_CTYPE"))
        result = {"content": json.dumps({"text": params["arguments"]["text"], "env": env,
                                         "home": os.environ.get("HOME"), "cwd": os.getcwd(),
                                         "allowed": os.environ.get("PY_ALLOWED")})}
    elif method == "shutdown":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
        break
    elif method == "$/ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "unknown method"}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
`

// TestRealProcessPlugin loads a Python process plugin through the default
// process starter and runs its hook and tool.
func TestRealProcessPlugin(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("this test needs %s: %v", python, err)
	}
	p := newProject(t)
	p.file("plugins/py/hookroom-plugin.json", `{"name":"py","version":"0.1","api_version":1,"command":["`+python+`","plugin.py"],"env":["PY_ALLOWED","PY_SECRET"]}`)
	p.file("plugins/py/plugin.py", pyPlugin)
	src := "plugins:\n  - ./plugins/py\n  - builtin: test_builtin\n    settings: {hooks: [\"py:echoed on_echo\"]}\n"
	t.Setenv("PY_ALLOWED", "yes")
	t.Setenv("PY_SECRET", "do-not-pass")
	l := &plugins.Loader{AllowEnv: func(config.PluginEntry) []string { return []string{"PY_ALLOWED"} }}
	ctx := hooktest.Context(t)
	set, err := l.Load(ctx, p.config(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { set.Close() }()
	reg, err := set.Registry(hooks.Options{})
	if err != nil {
		t.Fatal(err)
	}

	c := hooktest.ToolBeforeCall("shell", `{"cmd":"ls"}`)
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
	if !c.Declined || c.DeclineReason != "no shell" {
		t.Fatalf("gate: declined=%v reason=%q", c.Declined, c.DeclineReason)
	}
	c = hooktest.ToolBeforeCall("read_file", `{}`)
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
	if c.Declined {
		t.Fatalf("gate declined read_file: %q", c.DeclineReason)
	}

	testCalls.take()
	out, err := set.CallTool(ctx, reg, "py_echo", plugins.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{"text":"hi"}`), Agent: "code"}})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Text, Home, Cwd, Allowed string
		Env                      []string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("tool output %q: %v", out, err)
	}
	state := filepath.Join(p.root, "data", "plugins", "py")
	if res.Text != "hi" || res.Home != state || res.Cwd != state || res.Allowed != "yes" {
		t.Errorf("tool saw %+v, want home and cwd %s", res, state)
	}
	want := []string{"HOME", "LANG", "PATH", "PY_ALLOWED"}
	if sandbox.Available() > 0 { // confined: its temporary directory is in its state directory
		want = append(want, "TMPDIR")
	}
	if !slices.Equal(res.Env, want) {
		t.Errorf("process environment %q, want %q", res.Env, want)
	}
	if got := testCalls.take(); !slices.Equal(got, []string{"test_builtin/on_echo"}) {
		t.Errorf("custom event from the process tool ran %q", got)
	}

	// An unchanged reload keeps the process; a code change restarts it.
	inst1, _ := set.Instance("py")
	proc1, ok := plugins.Process(inst1)
	if !ok {
		t.Fatalf("instance %T is not a process plugin", inst1)
	}
	set2, err := l.Load(ctx, p.config(src), set)
	if err != nil {
		t.Fatal(err)
	}
	set.Close()
	set = set2
	inst2, _ := set.Instance("py")
	if proc2, _ := plugins.Process(inst2); proc2 != proc1 || !proc1.Healthy() {
		t.Fatal("an unchanged process plugin was restarted")
	}
	p.file("plugins/py/plugin.py", pyPlugin+"\n# v2\n")
	set3, err := l.Load(ctx, p.config(src), set)
	if err != nil {
		t.Fatal(err)
	}
	if got := set3.Changes(set); !slices.Equal(got, []string{"restarted py"}) {
		t.Errorf("changes %q", got)
	}
	set.Close()
	set = set3
	if proc1.Healthy() {
		t.Error("the old process is still running after its set was closed")
	}
	inst3, _ := set.Instance("py")
	if proc3, _ := plugins.Process(inst3); proc3 == proc1 || !proc3.Healthy() {
		t.Error("the changed plugin did not get a new, running process")
	}
	if !strings.Contains(strings.Join(set.Warnings(), "\n"), "PY_SECRET, which config.yaml does not allow") {
		t.Errorf("warnings %q do not mention the refused variable", set.Warnings())
	}
}
