# The Paperclip adapter (integrations/paperclip, docs/paperclip.md).
#
#   make paperclip-adapter        build it into $(PAPERCLIP_ADAPTER_DIR) and
#                                 print that absolute path on stdout
#   make paperclip-adapter-test   its unit tests (node --test)
#   make paperclip-adapter-doc    write the adapterConfig table of
#                                 docs/paperclip.md from its configSchema

PAPERCLIP_ADAPTER_DIR ?= $(CURDIR)/_out/paperclip-adapter
export PAPERCLIP_ADAPTER_DIR

.PHONY: paperclip-adapter paperclip-adapter-test paperclip-adapter-doc

paperclip-adapter:
	@bash integrations/paperclip/build.sh

paperclip-adapter-test: paperclip-adapter
	@cd integrations/paperclip && PATH="$$(bash ../../hack/node/install.sh):$$PATH" node --test 'test/*.test.mjs'

paperclip-adapter-doc: paperclip-adapter
	@cd integrations/paperclip && PATH="$$(bash ../../hack/node/install.sh):$$PATH" node test/gen-config-doc.mjs
