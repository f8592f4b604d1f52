// Package flightrpc holds the few Flight calls that lake's programs make to
// its services: a FILE append over DoPut and a typed DoAction. The client
// package and the query role's relay share them.
package flightrpc
