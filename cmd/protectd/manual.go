package main

import (
	_ "embed"

	"github.com/httpprotect/protect/internal/cmddoc"
)

// docSource is doc.go, whose package comment is protectd's manual.
//
//go:embed doc.go
var docSource string

// manual is what -h prints: the package comment of doc.go, as go doc
// shows it, without the comment markers.
var manual = cmddoc.Text(docSource)
