package auth

import (
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"

	"github.com/lakedata/lake/wire"
)

// flightMethod is the full gRPC name of a Flight method.
func flightMethod(name string) string {
	return "/" + flightgen.FlightService_ServiceDesc.ServiceName + "/" + name
}

var methodDoAction = flightMethod("DoAction")

// methodScopes is the scope each Flight method needs (DESIGN §12), by its
// full gRPC name. DoAction needs read to be called at all; the action it
// names decides the rest (ActionScope). DoPut needs write: lake takes
// only FILE appends through it, and SQL is read-only. DoExchange is
// served by no role, so it is kept for admin tokens.
var methodScopes = map[string]wire.Scope{
	flightMethod("Handshake"):      wire.ScopeRead,
	flightMethod("ListFlights"):    wire.ScopeRead,
	flightMethod("GetFlightInfo"):  wire.ScopeRead,
	flightMethod("PollFlightInfo"): wire.ScopeRead,
	flightMethod("GetSchema"):      wire.ScopeRead,
	flightMethod("DoGet"):          wire.ScopeRead,
	flightMethod("DoPut"):          wire.ScopeWrite,
	flightMethod("DoExchange"):     wire.ScopeAdmin,
	flightMethod("DoAction"):       wire.ScopeRead,
	flightMethod("ListActions"):    wire.ScopeRead,
}

// MethodScope is the scope a call of the gRPC method fullMethod
// ("/package.Service/Method") needs. A method that is not a Flight method
// needs admin, so a service registered later is closed until it is given
// a scope here.
func MethodScope(fullMethod string) wire.Scope {
	if s, ok := methodScopes[fullMethod]; ok {
		return s
	}
	return wire.ScopeAdmin
}

// ActionScope is the scope the DoAction type action needs, from the action
// table (wire.LookupAction); false for a type that is not lake's (Flight
// SQL's prepared statements, or a mistake), which the handler answers or
// refuses itself.
func ActionScope(action string) (wire.Scope, bool) {
	a, ok := wire.LookupAction(action)
	if !ok {
		return 0, false
	}
	return a.Scope, true
}
