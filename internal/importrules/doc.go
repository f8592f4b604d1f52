// Package importrules holds no code, only a test that keeps lake's layout
// (the import column of STYLE's layout table) true: the two roles never
// import each other, the client imports no role, and wire imports nothing
// of lake. The roles talk over Flight, and third-party clients build on
// wire alone, so an import that breaks one of these breaks the design
// without breaking the build; the test breaks instead.
package importrules
