// Command checkbinary checks that Go binaries are what deploy/Dockerfile promises: static ELF
// files (no program interpreter, no shared libraries) built with CGO_ENABLED=0 and -trimpath,
// without symbol table or DWARF (-ldflags "-s -w"; with -trimpath Go does not record -ldflags
// in the binary, so the missing sections are what is checked). scripts/build-image.sh runs it on the
// binaries it builds, so CI proves the image's build steps without a Docker engine.
//
//	go run ./deploy/checkbinary /tmp/out/agui-proxy /tmp/out/demo-agent
//
// It prints one line per binary and exits 1 when any check fails, naming each failure.
package main
