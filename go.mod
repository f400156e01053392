module github.com/ibcm/ibcm

go 1.26.8

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/leanovate/gopter v0.2.11 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
