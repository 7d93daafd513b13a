package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Tool is something the model can call. Call runs once per call the model
// makes (the tool loop calls it only after the tool:before_call gates
// allowed it), with the arguments JSON object the model produced; the
// string it returns is what the model sees. A returned error is shown to
// the model as a failed call, not treated as the turn's failure. Call must
// honour ctx (the tool loop bounds it) and be safe for concurrent use:
// turns in different rooms run at the same time. ToolCallFrom(ctx) tells it
// which agent, room and person the call is for.
type Tool interface {
	Spec() ToolSpec
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// ToolFunc adapts a function to the Tool interface.
type ToolFunc struct {
	ToolSpec ToolSpec
	Func     func(ctx context.Context, args json.RawMessage) (string, error)
}

var _ Tool = ToolFunc{}

// NewTool returns a Tool described by spec that runs fn.
func NewTool(spec ToolSpec, fn func(ctx context.Context, args json.RawMessage) (string, error)) ToolFunc {
	return ToolFunc{ToolSpec: spec, Func: fn}
}

// Spec returns the tool's spec.
func (t ToolFunc) Spec() ToolSpec { return t.ToolSpec }

// Call runs the function.
func (t ToolFunc) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return t.Func(ctx, args)
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidateToolSpec checks what OpenAI-compatible servers require of a tool:
// a name of 1 to 64 characters of [a-zA-Z0-9_-] and, when set, parameters
// that are a JSON object.
func ValidateToolSpec(s ToolSpec) error {
	if !toolNamePattern.MatchString(s.Name) {
		return fmt.Errorf("invalid tool name %q: want 1 to 64 characters of [a-zA-Z0-9_-]", s.Name)
	}
	if len(s.Parameters) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(s.Parameters, &obj); err != nil {
			return fmt.Errorf("invalid parameters schema of tool %q: want a JSON object: %w", s.Name, err)
		}
	}
	return nil
}

// Toolset is an immutable set of tools by name, in the order they were
// given. The zero value and nil are empty sets.
type Toolset struct {
	tools []Tool
	specs []ToolSpec
	index map[string]int
}

// NewToolset returns a set of tools. Invalid specs (ValidateToolSpec) and
// duplicate names are errors, all reported at once.
func NewToolset(tools ...Tool) (*Toolset, error) {
	ts := &Toolset{index: make(map[string]int, len(tools))}
	var errs []error
	for _, t := range tools {
		if t == nil {
			errs = append(errs, errors.New("nil tool"))
			continue
		}
		spec := t.Spec()
		if err := ValidateToolSpec(spec); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := ts.index[spec.Name]; dup {
			errs = append(errs, fmt.Errorf("duplicate tool name %q", spec.Name))
			continue
		}
		ts.index[spec.Name] = len(ts.tools)
		ts.tools = append(ts.tools, t)
		ts.specs = append(ts.specs, spec)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("failed to build toolset: %w", errors.Join(errs...))
	}
	return ts, nil
}

// Get returns the tool called name.
func (ts *Toolset) Get(name string) (Tool, bool) {
	if ts == nil {
		return nil, false
	}
	i, ok := ts.index[name]
	if !ok {
		return nil, false
	}
	return ts.tools[i], true
}

// Len returns the number of tools.
func (ts *Toolset) Len() int {
	if ts == nil {
		return 0
	}
	return len(ts.tools)
}

// Names returns the tool names in order.
func (ts *Toolset) Names() []string {
	if ts == nil {
		return nil
	}
	names := make([]string, len(ts.specs))
	for i, s := range ts.specs {
		names[i] = s.Name
	}
	return names
}

// Specs returns the specs to send to the model, in order.
func (ts *Toolset) Specs() []ToolSpec {
	if ts == nil {
		return nil
	}
	return slices.Clone(ts.specs)
}

// Select returns the subset of ts named by names (in the order of names),
// e.g. the tools an agent's configuration enables. Unknown names are an
// error naming them.
func (ts *Toolset) Select(names ...string) (*Toolset, error) {
	picked := make([]Tool, 0, len(names))
	var unknown []string
	for _, n := range names {
		t, ok := ts.Get(n)
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		picked = append(picked, t)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("failed to select tools: unknown tool(s) %s (known: %s)", strings.Join(unknown, ", "), strings.Join(ts.Names(), ", "))
	}
	return NewToolset(picked...)
}

// With returns a new set holding the tools of ts followed by more.
func (ts *Toolset) With(more ...Tool) (*Toolset, error) {
	var all []Tool
	if ts != nil {
		all = slices.Clone(ts.tools)
	}
	return NewToolset(append(all, more...)...)
}
