package main

import (
	"strings"
	"testing"
)

// TestRouteSettings: AGUI_STOP_ENDING, AGUI_AFTER_TERMINAL and AGUI_LINEAGE take one value for
// every route or route=value items (an AGUI_ROUTES prefix, or AGUI_ROUTE's name), and refuse
// unknown values and routes by name.
func TestRouteSettings(t *testing.T) {
	routes := "/agents/a=http://a:8000,/agents/b=http://b:9000"
	tests := []struct {
		name string
		env  map[string]string
		want map[string]routeSettings
		err  string
	}{
		{"defaults", map[string]string{"AGUI_ROUTES": routes}, map[string]routeSettings{
			"/agents/a": {"cancelled", "keep", "parentRunId"}, "/agents/b": {"cancelled", "keep", "parentRunId"}}, ""},
		{"one route named", map[string]string{"AGUI_ROUTES": routes, "AGUI_STOP_ENDING": "/agents/b/=error", "AGUI_LINEAGE": "metadata"},
			map[string]routeSettings{"/agents/a": {"cancelled", "keep", "metadata"}, "/agents/b": {"error", "keep", "metadata"}}, ""},
		{"a value for the others", map[string]string{"AGUI_ROUTES": routes, "AGUI_AFTER_TERMINAL": "refuse, /agents/a=keep"},
			map[string]routeSettings{"/agents/a": {"cancelled", "keep", "parentRunId"}, "/agents/b": {"cancelled", "refuse", "parentRunId"}}, ""},
		{"the single route by name", map[string]string{"AGUI_ROUTE": "chat", "AGUI_STOP_ENDING": "chat=error"},
			map[string]routeSettings{"chat": {"error", "keep", "parentRunId"}}, ""},
		{"unknown value", map[string]string{"AGUI_STOP_ENDING": "abort"}, nil, `AGUI_STOP_ENDING: "abort" is not one of cancelled, error`},
		{"unknown route", map[string]string{"AGUI_ROUTES": routes, "AGUI_LINEAGE": "/agents/c=metadata"}, nil, `AGUI_LINEAGE: "/agents/c" names no route`},
		{"twice", map[string]string{"AGUI_AFTER_TERMINAL": "keep,refuse"}, nil, `AGUI_AFTER_TERMINAL: "the value for every route" is given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(tt.env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("loadConfig = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := cfg.routeSettings()
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("routeSettings = %v, %v; want %v", got, err, tt.want)
			}
			for rt, want := range tt.want {
				if got[rt] != want {
					t.Errorf("route %s = %+v, want %+v", rt, got[rt], want)
				}
			}
		})
	}
}
