"""Amazon Polly's REST-JSON API under /polly, an edge of its own: its routes (`routes`), custom voices
(`custom_voices`), tasks as jobs (`tasks`), lexicons (`lexicons`), request shapes into options
(`shapes`), voice table (`voices`), errors and their wire shape (`errors`) and SigV4 signatures, verified
(`sigv4`). Assembled into the app by function.api.app."""
