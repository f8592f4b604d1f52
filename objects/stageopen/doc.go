// Package stageopen opens a managed stage by its kind: a --stage URI with
// its S3 settings on the server side, or a lake.discover descriptor on the
// client side. It is the one place that knows every backend.
package stageopen
