"""One module per Kafka API (or family); each exposes `async def handle(ctx, header, request)`."""
