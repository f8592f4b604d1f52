// Package flightrpc holds the few Flight calls that lake's programs make to
// its services: dialling one (plaintext by address, or by endpoint with TLS
// and a bearer token), a FILE append over DoPut and a typed DoAction. The
// client package and the query role's relay share them.
package flightrpc
