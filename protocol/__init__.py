from protocol import compiled

compiled.use()  # the optional compiled build's modules, before any of them is imported
