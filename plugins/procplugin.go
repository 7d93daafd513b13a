package plugins

import (
	"context"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
)

func init() { defaultStart = ProcessStarter(process.Supervision{}) }

// ProcessStarter returns the StartFunc that runs process plugins under the
// plugins/process supervisor with sup as their Supervision (zero fields:
// the supervisor's defaults). Load uses it with zero supervision unless
// Loader.StartProcess is set.
func ProcessStarter(sup process.Supervision) StartFunc {
	return func(ctx context.Context, spec ProcessSpec) (Instance, error) {
		spec.Supervision = sup
		p, err := process.Start(ctx, spec)
		if err != nil {
			return nil, err
		}
		return &processInstance{p: p}, nil
	}
}

// processInstance is a process plugin seen as an Instance.
type processInstance struct{ p *process.Plugin }

var (
	_ Instance       = (*processInstance)(nil)
	_ ToolProvider   = (*processInstance)(nil)
	_ HealthReporter = (*processInstance)(nil)
)

func (pi *processInstance) Hooks() []hooks.Hook { return pi.p.Hooks() }

// Tools turns the declared tools into Tools that call into the process.
func (pi *processInstance) Tools() []Tool {
	decls := pi.p.Tools()
	tools := make([]Tool, 0, len(decls))
	for _, d := range decls {
		name := d.Name
		tools = append(tools, Tool{
			Name: d.Name, Description: d.Description, Parameters: d.Parameters,
			Func: func(ctx context.Context, call ToolCall) (string, error) {
				return pi.p.CallTool(ctx, name, call)
			},
		})
	}
	return tools
}

func (pi *processInstance) Healthy() bool { return pi.p.Healthy() }

// Close stops the process.
func (pi *processInstance) Close() error { return pi.p.Close() }

// Process returns the supervisor's handle of a process plugin instance,
// for introspection; ok is false for other instances.
func Process(inst Instance) (p *process.Plugin, ok bool) {
	pi, ok := inst.(*processInstance)
	if !ok {
		return nil, false
	}
	return pi.p, true
}
