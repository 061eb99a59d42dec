APP_CLIENT = b"the app's own client module"
