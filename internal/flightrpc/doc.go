// Package flightrpc holds the few Flight calls that lake's programs make to
// its services: dialling one (plaintext by address, or by endpoint with TLS
// and a bearer token), a FILE append over DoPut and a typed DoAction, and a Pool of
// equivalent services that fails over between them. The client package,
// the query role's relay and meta's forwarding share them.
package flightrpc
