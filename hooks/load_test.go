package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// A nil handler, also a typed nil, is a load error naming plugin and hook.
func TestNilHandlerIsALoadError(t *testing.T) {
	var typedNil func(context.Context, *hooks.MessageReceivedContext) error
	var anyNil hooks.AnyHandler
	for _, tc := range []struct {
		name string
		hook hooks.Hook
	}{
		{"untyped nil", hooks.Handle[hooks.MessageReceivedContext](hooks.MessageReceived, "broken", nil)},
		{"typed nil", hooks.Handle(hooks.MessageReceived, "broken", typedNil)},
		{"nil AnyHandler", hooks.HandleAny("message:received", "broken", nil)},
		{"typed nil AnyHandler", hooks.HandleAny("todo:done", "broken", anyNil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := hooks.Handle(hooks.MessageReceived, "fine", func(context.Context, *hooks.MessageReceivedContext) error { return nil })
			_, err := hooks.NewRegistry([]hooks.Plugin{{Name: "geo", Hooks: []hooks.Hook{ok, tc.hook}}}, hooks.Options{})
			var le *hooks.LoadError
			if !errors.As(err, &le) || le.Plugin != "geo" || le.Hook != "broken" || !strings.Contains(err.Error(), "nil handler") {
				t.Fatalf("err = %v, want a load error for geo/broken saying the handler is nil", err)
			}
		})
	}
}
