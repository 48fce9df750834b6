package images

// Version is pcsync's release version: the tag of the images it builds
// and runs, and the version of a pcsync built from this source without a
// stamp (go build). make build stamps and make images tags with it unless
// TAG says otherwise (the Makefile reads it from this file), so render's
// default image references are the same from any build of one source.
const Version = "v0.4.0"
