module github.com/ibcm/ibcm

go 1.26.8

require (
	github.com/dave/jennifer v1.7.1
	github.com/leanovate/gopter v0.2.11
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
